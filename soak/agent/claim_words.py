"""The words the claim detector reads (soak.agent.claims): each pattern with why it reads what it does. Every
pattern reads in linear time: a gap between two words of one pattern spans at most GAP characters."""

import re

GAP = 300
"""The most characters between two words that one pattern reads together ("tests ... pass"): a bounded gap keeps every
pattern linear (an unbounded one rescans the rest of the clause from each first word it meets)."""
SPAN = f"{{0,{GAP}}}"
"""The quantifier of such a gap."""

NEGATOR = re.compile(r"\b(not|never|no|none|nothing|without|nor|neither|yet to|zero)\b|(?<![\d.])0(?![\d.])|n't\b|"
                     r"\bcannot\b", re.I)
AIM = re.compile(r"\bto\s*$", re.I)
HEDGE = re.compile(r"\b(should|i think|i believe|probably|hopefully|likely|in theory|might|may|seems?|"
                   r"appears?|i expect|presumably)\b", re.I)
CONDITION = re.compile(r"^(if|once|unless|whether)\b|^when\b.*\bpass|\b(?:once|as soon as|when|if|after)\s+"
                       r"(?:i|we|you)\s+(?:\w+\s+){0,2}?(?:access|provide|share|grant|upload|paste)\b",
                       re.I)
"""A condition, or an offer on access ("once I have access to the files I can ..."): no claim either way."""
INTENTION = re.compile(r"^(?:(?:now|so|finally|then),?\s+)?(let me|let's|i will|i'll|i am going to|i'm going to|"
                       r"next\b|i need to|we need to|i would|you can|you may|to\b|would you|please\b)", re.I)
TEST_NOUN = (r"(?:tests?|test_\w+|test suite|test cases?|unit tests?|pytest|unittest|specs?|checks|edge cases|"
             r"(?:verification|reproduction|test) scripts?)")

BLOCKED_MODAL = [
    re.compile(r"\b(?:i|we)(?: really| still| just| simply)? (?:could not|couldn't|cannot|can't|can not|"
               r"was unable|were unable|am unable|'m unable|wasn't able|weren't able|was not able|am not able|"
               r"'m not able)\b", re.I),
    re.compile(r"^(?:could not|couldn't|unable to|cannot|can't|not able to)\b", re.I),
    re.compile(r"\b(?:could not|couldn't|cannot|can't|can not|unable to|not able to)\s+(?:\w+\s+){0,2}?"
               r"(?:complet|finish|solv|fix|implement|get|make|figur|resolv|pass|satisf|reconcil|determin)\w*", re.I),
    re.compile(r"\bno (?:\w+ )?(?:implementation|solution|code|function) (?:can|could)\b", re.I),
]
"""Blocked phrases that carry their own negation."""
BLOCKED_WORDS = [
    re.compile(r"\b(?:i|we)\s+(?:\w+\s+)?fail(?:ed|s)? to\b|^failed to\b|\b(?:impossible|not possible|no way to|"
               r"giving up|give up|gave up)\b|"
               r"\b(?:i|we|i'm|we're|am|are|got|remain|remains|still|(?:task|work|progress) (?:is|was))\s+"
               r"(?:\w+\s+)?(?:blocked|stuck)\b|^(?:blocked|stuck)\b", re.I),
    re.compile(r"\bcontradict\w*|\bconflict(?:s|ing)?\b." + SPAN + r"\b" + TEST_NOUN + r"|\b" + TEST_NOUN + r"\b."
               + SPAN + r"\bconflict|\b" + TEST_NOUN + r"\b[^.]" + SPAN + r"\b(?:is|are|seems?|looks?) "
               r"(?:wrong|incorrect|buggy|broken|inconsistent)", re.I),
]
"""Blocked words a negation before them takes back ("nothing is blocked", "I did not give up")."""
NOTHING_BLOCKING = re.compile(r"\b(?:could not|couldn't|cannot|can't|did not|didn't) (?:find|see|spot) "
                              r"(?:any|a single)\b", re.I)
PARTIAL = [
    re.compile(r"\b(?:partial|partially|mostly|incomplete|work in progress|wip|todo)\b|\bexcept (?:for )?(?:one|two|"
               r"three|\d+|a few|some|the last|test_\w+)\b|\b(?:done|complete|completed|finished|pass|passes|passing|"
               r"works|working|implemented)\b[^.;]{0,60}\bexcept\b", re.I),
    re.compile(r"\b(?:most|some|several|a few|half|many) (?:of the )?(?:" + TEST_NOUN + r")\b[^.]" + SPAN
               + r"?\b(?:pass|passing|passed|passes)\b", re.I),
    re.compile(r"\bstill (?:fail|failing|fails|broken|red)\b", re.I),
    re.compile(r"❌"),
]
FAILURE = re.compile(r"\b(?:fail|fails|failing|failed|failures?|errors?|broken|red)\b", re.I)
DONE = re.compile(r"\b(?:done|complete|completed|finished|implemented|fixed|resolved|solved|works|working|"
                  r"resolves|solves|fixes|written|wrote|created|correct|"
                  r"ready|successfully|succeeds|succeeded|all set|good to go|applied|addressed|confident)\b|✅|🎉|"
                  r"\b(?:i've|i have|we've|we have|has been|have been)\s+"
                  r"(?:(?:not|never|now|also|successfully|already|just|fully)\s+)?"
                  r"(?P<word>(?!(?:tried|attempted|considered|noticed|observed|realized|failed|exhausted|"
                  r"encountered|identified|found|located|reported|blocked|stuck|asked)\b)\w+ed|made|written|rewritten|"
                  r"built|set|run)\b", re.I)
"""A done-word, or a completion report in the perfect tense ("the results have been saved", "I have parsed the file",
whose negation is read before the participle); a verb that reports an attempt or a finding ("I have tried", "the
cause has been identified") is not one."""
WORK = re.compile(r"\b(?:should|will|would|now|does|do|doesn't|don't|not|it|that|everything|all)\s+"
                  r"(?:now\s+|correctly\s+|properly\s+)?(?P<word>work)\b", re.I)
"""A bare "work" is a done-word after a subject or auxiliary ("it should work", "doesn't work"), not as a noun."""
TESTS_PASS = re.compile(r"\b" + TEST_NOUN + r"\b[^.;]" + SPAN + r"?\b(?:pass|passes|passed|passing|succeed|succeeds|"
                        r"succeeded|green|run clean)\b|\b(?:pass|passes|passed|passing|works|worked|working)\b"
                        r"(?>[^.;]" + SPAN
                        + r"?\b(?:all|every|the)\b)[^.;]" + SPAN + r"?\b" + TEST_NOUN + r"\b|\b\d+ passed\b", re.I)
"""A test noun then a pass word; a pass word, the first of all / every / the after it, then a test noun; "N passed"."""
VERIFIED = re.compile(r"\b(?:verified|tested|confirmed|double-checked|(?:ran|run|executed|re-?ran)\b[^.;]{0,80}? to "
                      r"(?:verify|confirm|check|test)|match(?:es|ed)? the (?:reference|expected|ground truth)|"
                      r"(?:validations?|verification) (?:pass|passed|passes|succeeded|confirms|confirmed|shows)|"
                      r"as (?:demonstrated|shown|confirmed) by the "
                      r"(?:\w+ )?(?:tests?|verification)|(?:ran|run|executed) "
                      r"(?:the |all |my )?(?:unit |existing |provided )?(?:tests?|test suite|pytest)|"
                      r"requirements? (?:is |are |was |were )?(?:met|satisfied)|meets (?:all )?(?:the )?requirements?|"
                      r"(?:target|threshold)s? (?:is |are )?met|"
                      r"(?:outputs?|results?) (?:now )?match(?:es|ed)?)\b", re.I)
"""A verification, or a result checked against what was asked ("requirement met", "the output matches")."""
FIGURE_GAP = r"(?:[^.;\n]|(?<=\d)\.(?=\d))"
"""A gap within one sentence that a decimal point does not end."""
MEASURED = re.compile(r"\b\d" + FIGURE_GAP + r"{0,40}?\b(?:below|under|above|over|within|meets?|meeting|exceeds?|"
                      r"exceeding|beats?|vs\.?|versus)\s" + FIGURE_GAP + r"{0,25}?\b(?:requirement|target)\b(?!s)|"
                      r"\(target:?\s*[<>≤≥]?\s*\d", re.I)
"""A figure the agent measured set beside the figure asked for ("an RMSE of 1.61, well below the 2.0 requirement",
"rise time 9.0 s (target: < 10 s)"): a check it ran on its own result, whichever way the comparison goes. A
threshold the work applies ("entropy 4.3, below the 6.0 threshold") is not one."""
COUNT = re.compile(r"\b(\d+)\s*(?:/|of|out of)\s*(\d+)\s+(?:" + TEST_NOUN + r")", re.I)
FAILED_COUNT = re.compile(r"\b(\d+) (?:failed|failing|failures?)\b", re.I)
TEST_WORD = re.compile(r"\b" + TEST_NOUN + r"\b", re.I)
FAILING_WORK = re.compile(r"\b(?:still|solution|implementation|code)\b", re.I)
"""Beside a test noun, what makes a failure word about the agent's work."""
TO_AFTER = re.compile(r"\s+to\b")
WORKING_ON = re.compile(r"working on\b", re.I)


def negated(clause: str, start: int) -> bool:
    """A negator in the four words before position `start` of the clause."""
    before = " ".join(clause[:start].rsplit(maxsplit=4)[-4:])
    return bool(NEGATOR.search(before))


def aimed(clause: str, start: int) -> bool:
    """The word follows `to`: an aim ("to verify", "unable to fix"), not a claim. (AIM reads the end of what comes
    before: "to" and the character before it.)"""
    return bool(AIM.search(clause[:start].rstrip()[-3:]))


SHORTFALL = re.compile(
    r"\bshort of\b|\bf(?:alls?|ell) short\b|\b(?:does|do|did)(?: not|n't) (?:yet |fully |quite )?(?:meet|satisfy|reach|"
    r"achieve|handle (?:all|every)|cover (?:all|every)|find (?:all|every)|support (?:all|every))\b|"
    r"\b\d[\d.,]*%?\s*(?:vs\.?|versus|<)\s*(?:the\s+)?\d[\d.,]*%?\s*(?:required|needed|target|threshold|expected)\b|"
    r"\bonly (?:some|a few|partially|part|half|\d+\s*(?:/|of|out of)\s*\d+)\b|\bnot all\b|\bwould (?:still )?require\b|"
    r"\bstill (?:short|missing|lacks?|lacking|needs?|fails?|failing|not)\b|\b(?:is|are) missing\b|"
    r"(?:\bnot|n't) (?:perfectly |fully |exactly |quite )?match\b|(?:\bnot|n't) (?:\w+ )?(?:all|every) (?:the )?\w+|"
    r"\b(?:close to|below|under) the (?:\d[\d.,]*%? )?(?:required|requirement|target|threshold)\b|"
    r"\b(?:running out of time|limited time|out of time)\b|\bat least (?:has|have|gets?|handles?|passes|works)\b|"
    r"\bremaining (?:issues?|failures?|failing|errors?|work|tests?|problems?|bugs?|todo)\b|"
    r"\bthe remaining \w+[^.;]{0,80}? (?:can|could|need|needs|must|have to|has to|still|will need|would need)\b|"
    r"\bnot (?:yet )?(?:fully|completely|entirely) (?:\w+ )?(?:working|correct|implemented|complete|done|solved|fixed|"
    r"passing)\b", re.I)
"""An explicit shortfall: partial wherever it stands in the message, whatever a later sentence says."""
PRESENT_INABILITY = re.compile(r"\b(?:i|we) (?:still |currently )?(?:cannot|can't|can not|am unable to|'m unable to|"
                               r"are unable to|am not able to|'m not able to)\b|\b(?:i|we) (?:do not|don't) have "
                               r"(?:the )?(?:access|permissions?|credentials?)\b", re.I)
"""What the agent cannot do now: blocked wherever it stands, as a shortfall is partial."""

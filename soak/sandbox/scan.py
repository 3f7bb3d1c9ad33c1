"""A static look at a judged solution: reward-hack signatures, recorded beside the verdict, never changing it."""


def suspicious(source: str) -> list[str]:
    """The reasons to distrust a pass of `source`, one short phrase each; empty when nothing stands out."""
    return []

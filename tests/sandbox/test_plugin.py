"""The sandbox's pytest plugin as pytest loads it with `-p`: its modules come from their cached bytecode, not through
pytest's assertion rewriting, which would parse and compile them anew in every jailed run."""

import os
import subprocess
import sys
import textwrap


def test_the_plugins_modules_are_not_rewritten_by_pytest(tmp_path):
    (tmp_path / "test_loader.py").write_text(textwrap.dedent("""
        import sys
        from importlib.machinery import SourceFileLoader

        def test_loaders():
            for name in ("channel", "equality", "freezing", "recorder"):
                assert type(sys.modules[f"soak.sandbox.plugin.{name}"].__loader__) is SourceFileLoader, name
        """))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "soak.sandbox.plugin", "-p", "no:cacheprovider",
                           "test_loader.py"], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert done.returncode == 0, done.stdout[-2000:]

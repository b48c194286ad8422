"""numba's compiler flags compared without reading every option (jetastar._numba_flags)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from numba.core.compiler import Flags
from numba.core.targetconfig import Option, TargetConfig

from jetastar import _numba_flags
from jetastar._numba_flags import installed, numba_values


def _flag_samples() -> list[Flags]:
    plain = Flags()
    some = Flags()
    some.nrt = True
    some.no_cpython_wrapper = True
    some.error_model = "numpy"
    at_default = Flags()
    at_default.boundscheck = False  # set, to its default value
    at_default.enable_ssa = True
    return [plain, some, at_default, some.copy()]


def test_jetastar_installs_it():
    assert installed()


@pytest.mark.parametrize("flags", _flag_samples())
def test_values_are_numbas_with_the_same_key_order(flags):
    ours = flags.values()
    theirs = numba_values(flags)
    assert ours == theirs
    assert list(ours) == list(theirs) == list(Flags.options)


def test_flags_compare_and_hash_as_before():
    plain, some, at_default, copied = _flag_samples()
    assert plain == at_default and hash(plain) == hash(at_default)  # set to the default = unset
    assert some == copied and some != plain


def test_values_reads_no_option_property():
    """The point of it: numba's values() runs one property getter per option (22), ours none."""
    flags = _flag_samples()[1]
    calls = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_name == "getter":
            calls.append(frame.f_code.co_qualname)

    sys.setprofile(profile)
    try:
        flags.values()
    finally:
        sys.setprofile(None)
    assert calls == []
    sys.setprofile(profile)
    try:
        numba_values(flags)
    finally:
        sys.setprofile(None)
    assert len(calls) == len(Flags.options)


class _Config(TargetConfig):
    speed = Option(type=int, default=1, doc="an option")
    mode = Option(type=str, default="a", doc="another")


class _Overriding(_Config):
    pass


# not numba's generated property (numba's metaclass replaces one defined in the class body, so
# only one set afterwards can differ): numba's values() must be used for this class
_Overriding.speed = property(lambda self: 42)


def test_a_class_that_overrides_an_option_keeps_numbas_values():
    config = _Config()
    config.mode = "b"
    assert config.values() == {"speed": 1, "mode": "b"}
    assert _Overriding().values() == {"speed": 42, "mode": "a"}
    assert _numba_flags._defaults[_Overriding] is None


def _python(code: str, **env: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], text=True,
                          capture_output=True, env=dict(os.environ, **env), timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_switched_off_and_not_installed_when_the_check_disagrees():
    assert _python("""
        import jetastar
        from jetastar._numba_flags import installed
        print(installed())
    """, JETASTAR_FAST_FLAGS="0") == "False"
    # with the switch on again: installed, unless numba's values() differs from ours (as if
    # numba had changed)
    check = """
        import os
        import jetastar
        from jetastar import _numba_flags
        os.environ["JETASTAR_FAST_FLAGS"] = "1"
        if DIFFERS:
            _numba_flags.numba_values = lambda config: {}
        _numba_flags.install()
        print(_numba_flags.installed())
    """
    assert _python(check.replace("DIFFERS", "False"), JETASTAR_FAST_FLAGS="0") == "True"
    assert _python(check.replace("DIFFERS", "True"), JETASTAR_FAST_FLAGS="0") == "False"

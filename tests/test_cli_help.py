"""Every option of every subcommand explains itself: a help text, and exactly one default shown
(a default of None must say in words what happens, never "(default: None)")."""
import argparse
import re

from symfast.cli import build_parser
from symfast.commands.runner import is_flag


def _subparsers():
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no subcommands")


def _problems() -> list:
    out = []
    for name, sub in _subparsers().items():
        fmt = sub.formatter_class(prog=sub.prog)
        for action in sub._actions:
            if isinstance(action, (argparse._HelpAction, argparse._VersionAction)) or action.help == argparse.SUPPRESS:
                continue
            opt = "/".join(action.option_strings) or action.dest
            if not (action.help or "").strip():
                out.append(f"{name} {opt}: no help")
                continue
            if not action.option_strings or action.required:  # positionals and required options: no default
                continue
            text = fmt._expand_help(action)
            if is_flag(action):  # on/off switches: absent means off, no default shown
                if re.search(r"\(default: (False|True)\)", text):
                    out.append(f"{name} {opt}: a switch shows its default: {text!r}")
                continue
            text = fmt._expand_help(action)
            n = len(re.findall(r"\bdefault\b", text, flags=re.I))
            if n != 1:
                out.append(f"{name} {opt}: {n} defaults shown: {text!r}")
            elif "(default: None)" in text:
                out.append(f"{name} {opt}: default None shown without words: {text!r}")
    return out


def test_every_option_has_help_and_exactly_one_default():
    assert _problems() == []


def test_help_output_prints_each_default_once():
    text = _subparsers()["readout"].format_help()
    assert "(default: None)" not in text
    assert not re.search(r"\(default: [^)]*\)\s*\(default:", text)


def test_every_command_describes_itself_in_one_style():
    """One style for the subcommands' one-line help: a lower-case start, no closing full stop."""
    for name, sub in _subparsers().items():
        text = sub.description or ""
        assert text and text[0].islower() and not text.endswith("."), (name, text)

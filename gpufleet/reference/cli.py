"""docs/reference/cli.md: every `gpufleet` subcommand and flag, read from the argparse parsers."""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

from gpufleet.cli import SUBCOMMANDS
from gpufleet.reference.markdown import page, table

REPO = Path(__file__).resolve().parents[2]


def _value(action: argparse.Action) -> str:
    if action.nargs == 0:
        return ""
    if action.metavar is not None:
        return str(action.metavar)
    if action.choices is not None:
        return "|".join(str(c) for c in action.choices)
    return action.dest.upper() if action.option_strings else action.dest


def _default(action: argparse.Action) -> str:
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS, [], False):
        return ""
    shown = str(action.default)
    if shown.startswith(f"{REPO}/"):  # a path in this checkout: the same in every checkout
        shown = shown[len(str(REPO)) + 1 :]
    return f"`{shown}`"


def _names(action: argparse.Action) -> str:
    if action.option_strings:
        return ", ".join(f"`{o}`" for o in action.option_strings)
    return f"`{action.dest}`" + (" (optional)" if action.nargs == "?" else "")


def arguments(parser: argparse.ArgumentParser) -> list[list[str]]:
    """One row per documented argument: names, value, default, allowed values, help."""
    rows = []
    for action in parser._actions:
        hidden = action.help == argparse.SUPPRESS
        if hidden or isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        choices = ", ".join(f"`{c}`" for c in action.choices or ())
        if isinstance(action, argparse._VersionAction):
            choices = ""
        rows.append([_names(action), _value(action), _default(action), choices, action.help or ""])
    return rows


def _subactions(parser: argparse.ArgumentParser) -> dict[str, tuple[argparse.ArgumentParser, str]]:
    """Action name -> (its parser, its one-line help), for a parser with sub-actions."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            return {name: (sub, helps.get(name, "")) for name, sub in action.choices.items()}
    return {}


def _section(level: str, name: str, parser: argparse.ArgumentParser, help_text: str) -> str:
    parts = [f"{level} `{name}`", help_text]
    if parser.description and parser.description != help_text:
        parts.append(parser.description)
    head = ["argument", "value", "default", "allowed", "meaning"]
    rows = arguments(parser)
    if rows:
        parts.append(table(head, rows))
    if parser.epilog:
        parts.append("```\n" + parser.epilog.strip() + "\n```")
    for action, (sub, sub_help) in _subactions(parser).items():
        parts.append(_section(level + "#", f"{name} {action}", sub, sub_help))
    return "\n\n".join(p.strip() for p in parts if p.strip())


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Action name -> its parser (``gpufleet sandbox up``), empty for a parser without any."""
    return {name: sub for name, (sub, _help) in _subactions(parser).items()}


def commands() -> dict[str, argparse.ArgumentParser]:
    """Subcommand -> its parser, each built by its own module's ``build_parser``."""
    return {
        name: importlib.import_module(module).build_parser()
        for name, (module, _help) in SUBCOMMANDS.items()
    }


INTRO = """\
Every subcommand of `gpufleet` and every flag it takes, as `gpufleet COMMAND --help` prints
them. Exit codes per subcommand: [exit-codes.md](exit-codes.md)."""


def render() -> str:
    parsers = commands()
    index = "\n".join(
        f"- [`gpufleet {n}`](#gpufleet-{n}): {h}" for n, (_m, h) in SUBCOMMANDS.items()
    )
    sections = [
        _section("##", f"gpufleet {name}", parsers[name], help_text)
        for name, (_module, help_text) in SUBCOMMANDS.items()
    ]
    return page("Command line", INTRO, index, *sections)

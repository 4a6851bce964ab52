"""Help screens are built from the screen's active bindings: every binding accuscope declares has an
id ("screen.action"), and each screen's help lists every key it answers with its description."""
from __future__ import annotations

import importlib
import inspect
import pkgutil

from rich.console import Console
from textual.binding import Binding
from textual.widgets import Static

import accuscope.app
from accuscope.app.advicescreen import AdviceScreen
from accuscope.app.app import AccuscopeApp
from accuscope.app.browser import BrowserScreen
from accuscope.app.dialogs import HelpScreen, _key_name
from accuscope.app.graphscreen import GraphScreen
from accuscope.app.opscreen import OpScreen
from accuscope.app.taskscreen import TaskScreen
from accuscope.engine.demo.workspace import MAIN, MSPROBE, ONNX_FP16
from accuscope.engine.tasks import taskdoc
from appkit import drive, wait_for


def test_every_binding_accuscope_declares_has_a_unique_id():
    for info in pkgutil.iter_modules(accuscope.app.__path__):
        module = importlib.import_module(f"accuscope.app.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__:
                continue
            ids = [b.id for b in vars(cls).get("BINDINGS", []) if isinstance(b, Binding)]
            assert all(ids), f"{cls.__name__} has a binding without an id"
            assert len(set(ids)) == len(ids), f"{cls.__name__} has two bindings with one id"


def help_text(help_screen: HelpScreen) -> str:
    console = Console(width=200, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    for static in help_screen.query(Static):
        console.print(static.content)
    return console.export_text()


def textual_own(namespace, binding: Binding) -> bool:
    """A binding textual declares (a screen's tab and ctrl+c, the app's command palette)."""
    textual = [cls for cls in type(namespace).__mro__ if cls.__module__.startswith("textual.")]
    declared = [b for cls in textual for b in vars(cls).get("BINDINGS", [])] + (
        [] if namespace is not namespace.app else [b for _, b in namespace.app._bindings])
    return any(isinstance(b, Binding) and b.action == binding.action and binding.key in b.key.split(",")
               for b in declared)


async def check_help(pilot, screen_type) -> None:
    screen = pilot.app.screen
    assert isinstance(screen, screen_type)
    await pilot.press("f1")
    help_screen = pilot.app.screen
    assert isinstance(help_screen, HelpScreen) and help_screen.for_screen is screen
    active = screen.active_bindings  # what the screen answers under its help (its focus is kept)
    lines = help_text(help_screen).splitlines()
    for key, (namespace, binding, _, _) in active.items():
        if not binding.description or namespace.check_consume_key("a", "a"):
            continue
        assert binding.id or textual_own(namespace, binding), f"{binding} has no id"
        row = [line for line in lines if binding.description in line and _key_name(key) in line]
        assert row, f"{screen_type.__name__}: {key} ({binding.description}) is not in its help"
    await pilot.press("escape")
    assert pilot.app.screen is screen


def test_each_screen_help_lists_the_keys_it_answers(demo_ws):
    async def script(pilot):
        app = pilot.app
        await wait_for(pilot, lambda: not app.screen.advising)
        await check_help(pilot, TaskScreen)
        await pilot.press("g")
        await wait_for(pilot, lambda: isinstance(app.screen, GraphScreen) and app.screen.graph is not None)
        await check_help(pilot, GraphScreen)
        await pilot.press("q")
        await pilot.press("!", "enter")  # a failing row's detail
        await wait_for(pilot, lambda: isinstance(app.screen, OpScreen) and app.screen.detail is not None
                       and not app.screen.computing)
        await check_help(pilot, OpScreen)
        await pilot.press("escape", "a")
        await check_help(pilot, AdviceScreen)
        await pilot.press("escape", "q")
        await check_help(pilot, BrowserScreen)  # (dialogs have no help: ? is not a key they answer)
    drive(AccuscopeApp(demo_ws, open_path=demo_ws / MAIN.name), script, size=(160, 50))


def test_the_keys_deciding_msprobe_pairs_are_in_the_help_of_msprobe_tasks_only(demo_ws):
    ids = {"task.accept_pair", "task.reject_pair", "task.accept_tensor", "task.reject_tensor", "task.pick_pair"}
    pair_keys = {b.description for b in TaskScreen.BINDINGS if isinstance(b, Binding) and b.id in ids}  # + - = _ p
    assert len(pair_keys) == 5

    async def script(pilot):
        await wait_for(pilot, lambda: not pilot.app.screen.advising)
        await pilot.press("f1")
        return help_text(pilot.app.screen)
    onnx = drive(AccuscopeApp(demo_ws, open_path=demo_ws / ONNX_FP16.name), script, size=(160, 50))
    msprobe = drive(AccuscopeApp(demo_ws, open_path=demo_ws / MSPROBE.name), script, size=(160, 50))
    assert "filter" in onnx and not [d for d in pair_keys if d in onnx] and "msprobe" not in onnx
    assert all(d in msprobe for d in pair_keys) and "Two msprobe dumps: + accepts" in msprobe
    # the comparison recorded it in task.json (pairs_calls), for the app to read without the registry
    assert taskdoc.read(demo_ws / MSPROBE.name).pairs_calls and not taskdoc.read(demo_ws / ONNX_FP16.name).pairs_calls


def test_the_command_palette_offers_the_pair_keys_on_msprobe_tasks_only(demo_ws):
    pair_keys = {b.description.capitalize() for b in TaskScreen.BINDINGS if isinstance(b, Binding) and b.action.split("(")[0] in TaskScreen.PAIR_ACTIONS}
    assert len(pair_keys) == 5

    async def script(pilot):
        await wait_for(pilot, lambda: not pilot.app.screen.advising)
        return {c.title for c in pilot.app.get_system_commands(pilot.app.screen)}
    onnx = drive(AccuscopeApp(demo_ws, open_path=demo_ws / ONNX_FP16.name), script)
    msprobe = drive(AccuscopeApp(demo_ws, open_path=demo_ws / MSPROBE.name), script)
    assert not pair_keys & onnx and any("filter" in title.lower() for title in onnx)
    assert pair_keys <= msprobe


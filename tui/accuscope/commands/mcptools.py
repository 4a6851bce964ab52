"""The MCP server of `accuscope mcp` (mcpserver.py starts it): the commands as tools an agent calls.

Each tool is a command: named as it, its parameters the command's own options (read from the parser
its `register` fills: an option added to a command appears here, typed and described as there, and
converted by the same argparse types), its result the object `--json` prints (answers.py). What
the CLI has for a terminal or a shell is left out: --json, --tui, --fail-on-error, show's
--format/--out, --cluster (addresses elsewhere), and what runs code: --custom-algorithms,
precision's --check.

Every path an agent gives is confined to the workspace the server was started with: relative to
it, resolved (links followed) and refused when it lands outside; the options naming files inside a
format's NAME=VALUE too. Long calls (compare, run, advise, sensitivity, precision, op) report the
engine's Progress as MCP progress notifications; a cancelled call sets the engine's cancel Event.
Nothing here prints: the SDK's stdio transport holds stdout for the protocol.

Read-only hints: show and list_tasks write nothing. advise, sensitivity and op write into the task
folder (advice.json, op/...): idempotent, not read-only; compare, run and precision write task folders.
"""
# lazy: commands.compare, commands.dump, commands.op, commands.precision, commands.run, commands.show,
# lazy: engine.compare.judgement, engine.compare.summary, engine.diagnose.advisor, engine.diagnose.oppair,
# lazy: engine.diagnose.sensitivity, engine.precision.workflow, engine.sides.registry, engine.tasks.task,
# lazy: engine.tasks.tasklist, engine.tasks.taskrun
from __future__ import annotations

import argparse
import inspect
import os
import threading
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from .. import __version__
from ..engine.progress import Progress
from ..engine.sources.tensor import SourceError
from . import options
from .answers import advice_json, op_json, precision_json, ranks_json, result_json, show_json

# What the CLI has that an agent is not given (see the module's docstring), by command.
LEFT_OUT = {"compare": {"json", "tui", "cluster", "fail_on_error", "custom_dir", "baseline"},  # a chain: the CLI's
            "run": {"json", "fail_on_error", "custom_dir", "baseline", "more"}, "advise": {"json"}, "sensitivity": {"json"},
            "show": {"format", "out", "fail_on_error"}, "op": set(), "precision": {"json", "check"}}
# The options naming a path (a word among WORDS is not one: --shards names, --expected auto).
PATHS = {"compare": {"source", "npu", "golden", "expected", "shards", "model", "npu_model", "golden_model",
                     "mapping", "out"},
         "run": {"reference", "candidate", "expected", "mapping", "out", "input"},
         "advise": {"task", "framework_model"}, "sensitivity": {"task", "framework_model"},
         "show": {"task"}, "op": {"task", "out"}, "precision": {"model", "out", "calibration", "input"}}
WORDS = ("names", "auto")
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITES_TASK = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                              open_world_hint=False)  # advice.json, op/: the same files again
MAKES_TASK = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False,
                             open_world_hint=False)  # a task folder's result replaced
PAGE = 100  # show's rows per call unless `limit` says


class Workspace:
    """The folder the server serves: every path an agent gives resolves inside it, or is refused."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(os.path.realpath(os.path.expanduser(str(root))))

    def path(self, value: str, what: str) -> str:
        """`value` (relative: to the workspace) resolved, links followed; ToolError outside it."""
        given = Path(os.path.expanduser(str(value)))
        real = Path(os.path.realpath(given if given.is_absolute() else self.root / given))
        if real != self.root and self.root not in real.parents:
            raise ToolError(f"{what} {value}: outside the workspace {self.root} (this server reads and writes "
                            "only under it)")
        return str(real)


class Declared(argparse.ArgumentParser):
    """A command's parser that keeps what its `register` declared, through argparse's public calls alone
    (it lists a parser's options only in private fields): each option's Action, as `add_argument` returns
    it, with the `action=` it was declared with (`kinds`), and the mutually exclusive groups' options."""

    def __init__(self, **kwargs) -> None:
        self.declared: list[argparse.Action] = []
        self.kinds: dict[str, str] = {}  # dest -> the `action=` word given ("store_true", "append", ...)
        self.exclusive: list[list[argparse.Action]] = []
        self.made = False
        super().__init__(**kwargs)  # (it adds -h and its own two groups: not the command's)
        self.made = True

    def add_argument(self, *args, **kwargs) -> argparse.Action:
        return self.declare(super().add_argument(*args, **kwargs), kwargs)

    def add_mutually_exclusive_group(self, **kwargs) -> Any:
        members: list[argparse.Action] = []
        self.exclusive.append(members)
        return _Group(self, super().add_mutually_exclusive_group(**kwargs), members)

    def add_argument_group(self, *args, **kwargs) -> Any:
        group = super().add_argument_group(*args, **kwargs)
        return _Group(self, group, []) if self.made else group

    def declare(self, action: argparse.Action, kwargs: dict) -> argparse.Action:
        if self.made:
            self.declared.append(action)
            if isinstance(kwargs.get("action"), str):
                self.kinds[action.dest] = kwargs["action"]
        return action


class _Group:
    """A group of a Declared parser: its options declared there too."""

    def __init__(self, parser: Declared, group: Any, members: list[argparse.Action]) -> None:
        self.parser, self.group, self.members = parser, group, members

    def add_argument(self, *args, **kwargs) -> argparse.Action:
        action = self.parser.declare(self.group.add_argument(*args, **kwargs), kwargs)
        self.members.append(action)
        return action


def _cli_parser(command: str) -> Declared:
    parser = Declared(prog=f"accuscope {command}")
    options(command, parser)
    return parser


def _flag(action: argparse.Action) -> str:
    return action.option_strings[-1] if action.option_strings else action.dest.upper()


def _value_type(action: argparse.Action) -> type:
    """int or float where the option's values are (its type, its converter's return annotation), else str."""
    if action.type in (int, float):
        return action.type
    try:
        returns = typing.get_type_hints(action.type).get("return") if callable(action.type) else None
    except (NameError, TypeError):
        returns = None
    return returns if returns in (int, float) else str


def _parameter(action: argparse.Action, kind_word: str = "") -> inspect.Parameter:
    """The tool parameter of one CLI option (`kind_word`: the `action=` it was declared with): its dest, a type
    the option's values have, its help."""
    scalar: Any = _value_type(action)
    if action.choices is not None:
        scalar = Literal[tuple(action.choices)]
    positional_required = not action.option_strings and action.nargs is None
    # the parameter's annotation and default are run-time values (types built here for the tool's schema)
    kind: Any
    default: Any
    if kind_word == "store_true":
        kind, default = bool, False
    elif kind_word == "append":
        kind, default = list[str] | None, None
    elif action.required or positional_required:
        kind, default = scalar, inspect.Parameter.empty
    else:
        default = action.default
        kind = scalar if default is not None else scalar | None
    described = Annotated[kind, Field(description=f"{_flag(action)}: {action.help or ''}")]
    return inspect.Parameter(action.dest, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=described)


def _actions(command: str, parser: Declared) -> list[argparse.Action]:
    return [a for a in parser.declared if a.dest not in LEFT_OUT[command] and a.help != argparse.SUPPRESS]


def _namespace(command: str, parser: Declared, given: dict, ws: Workspace) -> argparse.Namespace:
    """The args the command's own functions take: every option's default, then the given values
    converted by the option's argparse type, each path confined to the workspace."""
    args = argparse.Namespace(**{a.dest: a.default for a in parser.declared})
    args.json, args.fail_on_error, args.tui, args.cluster, args.custom_dir = False, False, False, None, None
    by_dest = {a.dest: a for a in parser.declared}
    for members in parser.exclusive:
        both = [_flag(a) for a in members if given.get(a.dest) is not None]
        if len(both) > 1:
            raise ToolError(f"{' and '.join(both)}: give one of them")
    for dest, value in given.items():
        action = by_dest[dest]
        if value is None:
            continue
        if dest in PATHS[command]:
            value = [_confined(v, action, ws) for v in value] if isinstance(value, list) else \
                _confined(value, action, ws)
        convert = action.type if callable(action.type) and action.type not in (int, float, str) else None
        try:
            if convert is not None and not isinstance(value, bool):  # a number checked as its text is
                value = [convert(str(v)) for v in value] if isinstance(value, list) else convert(str(value))
        except (argparse.ArgumentTypeError, ValueError, TypeError) as exc:
            raise ToolError(f"{_flag(action)} {value}: {exc}") from None
        setattr(args, dest, value)
    return args


def _confined(value: str, action: argparse.Action, ws: Workspace) -> str:
    """A path option's value confined; NAME=FILE (--input) its file; a word (WORDS) as it is."""
    if value in WORDS:
        return value
    if action.dest == "input":
        name, sep, path = value.partition("=")
        return f"{name}={ws.path(path, f'{_flag(action)} {name}=')}" if sep else value
    return ws.path(value, _flag(action))


def _confine_spec(spec, ws: Workspace) -> None:
    """Every path a comparison will open (CompareSpec) inside the workspace, the files its format
    options name (NAME=VALUE, registry Option.path) included."""
    from ..engine.sides.registry import detect
    for field in ("npu", "golden", "model", "npu_model", "golden_model", "mapping", "expected"):
        value = getattr(spec, field, None)
        if value:
            ws.path(value, f"--{field.replace('_', '-')}")
    if spec.shards and spec.shards not in WORDS:
        ws.path(spec.shards, "--shards")
    for side, given in ((spec.npu, spec.npu_options), (spec.golden, spec.golden_options)):
        if given:
            paths = {o.name for o in detect(side).options if o.path}
            for name, value in given.items():
                if name in paths and value:
                    ws.path(value, f"option {name}=")


class Reporter:
    """The engine's progress (from any thread) sent to the client as MCP progress notifications: the
    latest Progress, sent every tenth of a second while it changes, and the last one at the end."""

    def __init__(self, ctx: Context):
        self.ctx, self.lock = ctx, threading.Lock()
        self.latest: tuple[float, float | None, str] | None = None
        self.sent: tuple | None = None
        self.stage = ""

    def __call__(self, p: Progress) -> None:
        what = f"{self.stage}: {p.what}" if self.stage and p.what else self.stage or p.what
        with self.lock:
            self.latest = (float(p.done), float(p.total) if p.total else None, what)

    def say(self, what: str, done: int = 0, total: int = 0) -> None:
        with self.lock:
            self.latest = (float(done), float(total) if total else None, what)

    async def send(self) -> None:
        with self.lock:
            latest = self.latest
        if latest is not None and latest != self.sent:
            self.sent = latest
            await self.ctx.report_progress(*latest)

    async def run(self, work):
        """`work(cancel)` on a worker thread, its progress sent meanwhile; cancelled, it is told. A
        SourceError (or a place that cannot be written) is the tool's error, its message the CLI's."""
        cancel = threading.Event()
        failed: Exception | None = None

        async def tick():
            while True:
                await anyio.sleep(0.1)
                await self.send()
        async with anyio.create_task_group() as tg:
            tg.start_soon(tick)
            try:
                result = await anyio.to_thread.run_sync(lambda: work(cancel), abandon_on_cancel=True)
            except anyio.get_cancelled_exc_class():
                cancel.set()
                raise
            except Exception as exc:  # noqa: BLE001 - raised below, out of the task group
                failed = exc
            finally:
                tg.cancel_scope.cancel()
        if failed is not None:
            raise _tool_error(failed) from None
        await self.send()
        return result


def _tool_error(exc: Exception) -> Exception:
    """A user's problem (SourceError, a place that cannot be written) as the ToolError saying it, as the
    CLI's exit 2 says it; anything else as it is (the SDK logs it, on stderr, and says it failed)."""
    from ..engine.tasks.task import unwritable
    if isinstance(exc, (ToolError, SourceError)):
        return ToolError(str(exc))
    known = unwritable(exc, getattr(exc, "filename", None) or "") if isinstance(exc, OSError) else None
    return ToolError(str(known)) if known is not None else exc


def _compared(spec, out: str, args, cancel, progress) -> dict:
    """compare's (and run's) answer: the comparison run into `out`, judged, advised on if asked."""
    from ..engine.compare.summary import summarize
    from ..engine.tasks.taskrun import RunResult, run_comparison
    from .compare import ranks_summary
    result = run_comparison(spec, out, workers=args.workers, cancel=cancel,
                            one_source=bool(getattr(args, "source", None)), progress=progress)
    advice = None
    if getattr(args, "advisor", False) and not cancel.is_set():
        from ..engine.diagnose.advisor import advise
        advice = advise(out, workers=args.workers)
    if isinstance(result, RunResult):
        compared = result.compared
        if compared is None:
            raise SourceError("cancelled: the previous result in the task folder, if any, is untouched")
        plan, table = compared
        summary = summarize(table, spec.thresholds, plan.coverage.basis)
        return result_json(out, plan, summary, table, advice)
    return ranks_json(out, result, ranks_summary(spec, result), advice)


def task_entry(s) -> dict:
    """One entry of list_tasks (tasklist.TaskSummary) as plain values."""
    from dataclasses import asdict
    return {k: str(v) if isinstance(v, Path) else v for k, v in asdict(s).items()}


class Server(MCPServer):
    """MCPServer whose resources are the workspace's task folders as they are now (listed per call)."""

    def __init__(self, ws: Workspace, **kw):
        super().__init__(**kw)
        self.ws = ws

    async def list_resources(self):
        from mcp.types import Resource

        from ..engine.tasks.tasklist import list_tasks
        tasks = await anyio.to_thread.run_sync(list_tasks, self.ws.root)
        return [*await super().list_resources(),
                *(Resource(uri=f"accuscope://task/{s.name}", name=s.name, mime_type="application/json",
                           description=f"task {s.name}: {s.state or s.kind}, {s.verdict or 'no verdict'}, "
                                       f"{s.rows or 0} rows, {s.failing or 0} failing")
                  for s in tasks if s.kind == "task")]


def build_server(workspace: str | os.PathLike) -> Server:
    """The server over `workspace` (a folder that exists): its tools and its task resources."""
    ws = Workspace(workspace)
    server = Server(ws, name="accuscope", version=__version__, log_level="WARNING",
                    instructions="accuscope compares a converted / lower-precision network's dumps with the "
                                 f"reference's, operator by operator. Paths are under the workspace {ws.root} "
                                 "(relative ones are its). compare or run makes a task folder; show, op, advise, "
                                 "sensitivity read one.")

    def tool(command: str, annotations: ToolAnnotations, extra: tuple[inspect.Parameter, ...] = ()):
        """Register `body(args, given, reporter)` as the tool `command`, its parameters the CLI's."""
        parser = _cli_parser(command)
        params = [_parameter(a, parser.kinds.get(a.dest, "")) for a in _actions(command, parser)]
        params.sort(key=lambda p: p.default is not inspect.Parameter.empty)  # required first

        def register(body):
            async def call(ctx: Context, **given) -> dict[str, Any]:
                extras = {p.name: given.pop(p.name, p.default) for p in extra}
                try:
                    args = _namespace(command, parser, given, ws)
                    return await body(args, extras, Reporter(ctx))
                except (SourceError, OSError) as exc:
                    raise _tool_error(exc) from None
            call.__name__ = command
            call.__doc__ = parser.description
            call.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
                [inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context), *params, *extra],
                return_annotation=dict[str, Any])
            call.__annotations__ = {"ctx": Context, "return": dict[str, Any]}
            server.add_tool(call, name=command, description=parser.description, annotations=annotations)
            return body
        return register

    @tool("compare", MAKES_TASK)
    async def compare(args, extras, reporter):
        from .compare import spec_of
        spec = spec_of(args)
        _confine_spec(spec, ws)
        return await reporter.run(lambda cancel: _compared(spec, args.out, args, cancel, reporter))

    @tool("run", MAKES_TASK)
    async def run(args, extras, reporter):
        from .dump import dump_on_runtime
        from .run import drop_older_dumps, dump_sides

        def dump(model, out_dir, label, **kw):
            reporter.stage = label
            return dump_on_runtime(model, out_dir, reporter, **kw)

        def work(cancel):
            dumped = dump_sides(args, dump)
            reporter.stage = "comparing"
            answer = _compared(dumped.spec, args.out, args, cancel, reporter)
            drop_older_dumps(Path(args.out), dumped.generation)
            return answer
        return await reporter.run(work)

    @tool("advise", WRITES_TASK)
    async def advise(args, extras, reporter):
        from ..engine.diagnose.advisor import advise as advise_task
        from ..engine.tasks.task import load_task

        def work(cancel):
            task = load_task(args.task)  # once: the advisor and the answer's summary both read it
            return advice_json(advise_task(task, args.framework_model, progress=reporter, workers=args.workers,
                                           verify=max(0, args.verify)), task)
        return await reporter.run(work)

    @tool("sensitivity", WRITES_TASK)
    async def sensitivity(args, extras, reporter):
        from ..engine.diagnose.sensitivity import sensitivity as rank

        def work(cancel):
            ranking = rank(args.task, args.framework_model, progress=reporter, workers=args.workers)
            return ranking.to_dict(args.top, ranking.recipe(args.top))
        return await reporter.run(work)

    @tool("precision", MAKES_TASK)
    async def precision(args, extras, reporter):
        from ..engine.precision.workflow import run_precision
        from .precision import spec_of as precision_spec

        def on_event(e) -> None:
            if e.stage == "trial" and e.trial:
                reporter.say(f"trial {e.trial.n} {e.trial.phase}: {len(e.trial.keep)} op(s) in fp32",
                             e.trial.n, args.max_trials or 0)
            else:
                reporter.say(f"{e.stage}: {e.detail}" if e.detail else e.stage)
        return await reporter.run(lambda cancel: precision_json(run_precision(precision_spec(args), on_event, cancel)))

    paging = (inspect.Parameter("offset", inspect.Parameter.KEYWORD_ONLY, default=0, annotation=Annotated[
                  int, Field(ge=0, description="the first of the rows to return (0-based, among those selected)")]),
              inspect.Parameter("limit", inspect.Parameter.KEYWORD_ONLY, default=PAGE, annotation=Annotated[
                  int, Field(ge=1, le=10000, description=f"how many rows to return (default {PAGE})")]))

    @tool("show", READ_ONLY, paging)
    async def show(args, extras, reporter):
        def work(cancel):
            import numpy as np

            from ..engine.compare import judgement
            from ..engine.compare.summary import summarize
            from ..engine.tasks.task import load_task
            from .show import columns_of
            task = load_task(args.task)
            columns = columns_of(task, args.columns)
            table, thresholds = task.result
            s = summarize(table, thresholds, task.basis)
            chosen = np.flatnonzero(judgement.evaluate(table, thresholds).fail) if args.failing else \
                np.arange(len(table))
            start = min(extras["offset"], len(chosen))
            page = chosen[start:start + extras["limit"]]
            doc, why = show_json(task, s, columns, page)
            end = start + len(page)
            return {**doc, "offset": start, "selected": len(chosen), "next_offset": end if end < len(chosen) else None,
                    **({"stack_note": why} if why else {})}
        return await reporter.run(work)

    @tool("op", WRITES_TASK)
    async def op(args, extras, reporter):
        def work(cancel):
            from ..engine.diagnose.oppair import open_op
            from .op import measure
            io = "input" if args.input is not None else "output" if args.output is not None else None
            pair = open_op(args.task, args.op, io, args.input if args.input is not None else args.output)
            detail, folder, files, count = measure(pair, args.task, args.top, args.by, args.above, args.out,
                                                   progress=reporter)
            return op_json(detail, pair.info, args.by, args.above, count, files)
        return await reporter.run(work)

    @server.tool(name="list_tasks", annotations=READ_ONLY)
    async def list_tasks() -> dict[str, Any]:
        """The task folders (and foreign result CSVs) under the workspace, newest first: each one's path
        relative to the workspace (`name`), state, verdict, rows, failing rows and first failing op."""
        from ..engine.tasks.tasklist import list_tasks as listed
        tasks = await anyio.to_thread.run_sync(listed, ws.root)
        return {"workspace": str(ws.root), "tasks": [task_entry(s) for s in tasks]}

    @server.resource("accuscope://task/{+name}", mime_type="application/json",
                     description="a task folder of the workspace: its verdict, first failing row, coverage and files")
    def task_resource(name: str) -> str:
        import json

        from ..engine.compare.summary import summarize
        from ..engine.tasks.task import load_task
        folder = ws.path(name, "task")
        try:
            task = load_task(folder)
        except SourceError as exc:
            raise ToolError(str(exc)) from None
        doc, _ = show_json(task, summarize(*task.result, task.basis), [], [])
        del doc["columns"], doc["data"]
        doc["files"] = sorted(p.name for p in Path(folder).iterdir())
        return json.dumps(doc, ensure_ascii=False)

    return server

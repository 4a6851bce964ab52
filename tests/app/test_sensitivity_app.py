"""The advisor screen's ranked ops (`s`): the same ranking as `accuscope sensitivity`, on screen, and
enter jumps to the op's row in the table."""
from __future__ import annotations

from accuscope.app.advicescreen import AdviceScreen
from accuscope.app.app import AccuscopeApp
from accuscope.app.optable import OperatorTable
from accuscope.engine.demo.workspace import MAIN
from accuscope.engine.diagnose.sensitivity import sensitivity
from appkit import drive, screen_text, wait_for
from support.narrow import present


def test_advisor_screen_toggles_to_the_ranked_ops_and_jumps_to_one(ws):
    async def script(pilot):
        screen = pilot.app.screen
        await wait_for(pilot, lambda: screen.advice is not None)
        await pilot.press("a")
        advisor = pilot.app.screen
        assert isinstance(advisor, AdviceScreen)
        await pilot.press("s")
        await wait_for(pilot, lambda: advisor.ranking is not None or advisor.ranking_error)
        await pilot.pause()
        assert not advisor.ranking_error
        ranking = advisor.ranking
        assert ranking is not None
        assert ranking.ops and ranking.ops[0].origin == "introduced"
        cause = present(advisor.advice).cause
        assert cause is not None
        assert ranking.ops[0].op == cause.op  # the same op the advisor names first
        text = screen_text(pilot.app)
        assert "1-cos" in text and "introduced" in text and "network outputs:" in text
        assert ranking.ops[0].op[:12] in text  # the first ranked op is on screen
        assert "node_block_list / nodes_to_exclude" in text
        await pilot.press("s")  # back to the findings
        assert not advisor.showing_ranking
        await pilot.press("s", "down", "enter")
        assert pilot.app.screen is screen
        assert screen.query_one(OperatorTable).cursor_row == ranking.ops[1].row
        return ranking
    ranking = drive(AccuscopeApp(ws, open_path=ws / MAIN.name), script, size=(120, 40))
    # the same list as the command's
    assert [o.op for o in sensitivity(ws / MAIN.name).ops] == [o.op for o in ranking.ops]


def test_the_ranking_is_made_on_the_opened_task_under_the_thresholds_shown(ws):
    """The ranked ops (`s`) are the opened task's, ranked from the advice under the thresholds edited in
    the app, never a copy read again from the folder: here the folder's result files are gone by the
    time `s` is pressed (another process removed or is rewriting them), and the ranking still comes,
    its verdict the shown thresholds'."""
    folder = ws / MAIN.name

    async def script(pilot):
        screen = pilot.app.screen
        await wait_for(pilot, lambda: screen.advice is not None)
        await pilot.press("t")
        await pilot.pause()
        pilot.app.screen.query_one("Input").value = "cos=0.9999"
        await pilot.press("enter")
        await wait_for(pilot, lambda: not screen.saving and not screen.advising and screen.advice is not None
                       and screen.advice.task["thresholds"]["cos"]["value"] == 0.9999)
        for result in [folder / "result.npz", *folder.glob("result_*.csv")]:
            result.unlink()
        await pilot.press("a", "s")
        advisor = pilot.app.screen
        assert isinstance(advisor, AdviceScreen)
        await wait_for(pilot, lambda: advisor.ranking is not None or advisor.ranking_error)
        assert not advisor.ranking_error
        assert advisor.ranking is not None
        assert "< 0.9999" in advisor.ranking.verdict  # the thresholds shown, not those the folder held at start
        assert sorted(o.op for o in advisor.ranking.ops) == sorted(o.op for o in present(advisor.advice).ops)
        return advisor.ranking
    drive(AccuscopeApp(ws, open_path=folder), script, size=(120, 40))

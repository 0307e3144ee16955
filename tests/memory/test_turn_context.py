"""What the face gives a turn's context and its costs: a voice turn's pre-made recall split as the
text path's own recall is (``MemoryContext.recalled_from``), and whose cost a memory job is
(``job_charge``)."""

from __future__ import annotations

from conftest import remember

from memory import Charge, MemoryContext, job_charge
from memory.jobs.upkeep import Consolidation
from memory.models import FactKind


def test_a_pre_made_recall_is_cut_to_eight_rules_and_the_knobs_top_k_of_the_rest(engine):
    engine.knobs.update("memories", {"top_k": 3})
    rules = [
        remember(engine, f"answer in rhyme number {i}", kind=FactKind.BEHAVIORAL) for i in range(10)
    ]
    facts = [remember(engine, f"Alice owns {n} kites") for n in ("two", "three", "four", "five")]
    ranked = [rules[0], facts[0], rules[1], *facts[1:], *rules[2:]]
    split = MemoryContext(engine).recalled_from(ranked, rules)
    assert split.behavioral == tuple(rules[:8])
    # a rule never fills a place of the relevant memories, whatever its rank
    assert split.relevant == tuple(facts[:3])


def test_a_pre_made_recall_with_nothing_in_it_is_two_empty_sections(engine):
    split = MemoryContext(engine).recalled_from([], [])
    assert (split.behavioral, split.relevant) == ((), ())


def test_consolidation_is_nobodys_cost_and_a_job_it_does_not_know_is_left_to_the_caller(engine):
    assert job_charge(Consolidation(engine), None) == Charge("consolidation")
    assert job_charge(object(), None) is None
    assert job_charge("extraction", ("a plan",)) is None  # a name is not a job

"""How the pages say values: three-state correct, zero-code ids, templates, models, columns."""

from __future__ import annotations

import math

import pandas as pd

from midtrace.dashboard import labels

HEX64 = "3f2a91c0" + "ab" * 28


def test_correct_has_three_states_and_never_reads_as_a_checkbox() -> None:
    assert [labels.correct(v) for v in (True, False, None, math.nan)] == [
        "right", "wrong", "not graded", "not graded"]


def test_zero_code_ids_templates_and_models_are_said_plainly() -> None:
    assert labels.short_id(HEX64) == "3f2a91c0…"
    assert labels.short_id("refund-policy#2") == "refund-policy#2"
    assert labels.template("sha256:63b2aa0912cd34ef") == "unnamed template 63b2…"
    assert labels.template("support-v2") == "support-v2"
    assert labels.model(None) == "unknown model" and labels.model("") == "unknown model"
    assert labels.slice_label("template", "sha256:63b2aa0912cd34ef") == \
        "template: unnamed template 63b2…"


def test_a_table_shows_readable_values_and_keeps_the_whole_id_to_copy() -> None:
    frame = pd.DataFrame({"chunk_id": [HEX64, "faq#1"], "correct": [None, False],
                          "is_decisive": [True, None], "template_id": ["sha256:63b2aa09", "v1"],
                          "accuracy": [0.5, 0.25]})
    shown = labels.readable(frame)
    assert list(shown["chunk_id"]) == ["3f2a91c0…", "faq#1"]
    assert list(shown["chunk_full_id"]) == [HEX64, "faq#1"]
    assert list(shown["correct"]) == ["not graded", "wrong"]
    assert list(shown["is_decisive"]) == ["yes", "—"]
    assert list(shown["template_id"]) == ["unnamed template 63b2…", "v1"]
    assert list(frame["chunk_id"]) == [HEX64, "faq#1"]  # the frame behind the CSV is untouched
    assert labels.column("taxonomy_class") == "failure class"
    assert labels.column("some_new_column") == "some new column"
    assert labels.is_rate("accuracy") and labels.is_rate("buried_rate")
    assert not labels.is_rate("requests")

"""The pure rules of message versions: groups, adding a version, switching, dropping."""

from __future__ import annotations

import pytest

from api.rules import version_rules
from api.rules.errors import BadRequest, Conflict

A, B, C, D = ("a" * 32, "b" * 32, "c" * 32, "d" * 32)


def test_a_first_edit_at_an_index_makes_a_group_of_the_kept_tail_and_the_new_version():
    assert version_rules.add_version([], 2, A) == [{"index": 2, "versions": [A, None], "current": 1}]


def test_another_edit_at_the_same_index_keeps_the_shown_version_and_shows_a_new_one():
    groups = [{"index": 2, "versions": [A, None], "current": 1}]
    assert version_rules.add_version(groups, 2, B) == [{"index": 2, "versions": [A, B, None], "current": 2}]


def test_an_edit_before_a_group_takes_that_group_into_the_kept_tail():
    groups = [
        {"index": 0, "versions": [A, None], "current": 1},
        {"index": 4, "versions": [B, None], "current": 1},
    ]
    assert version_rules.add_version(groups, 2, C) == [
        groups[0],
        {"index": 2, "versions": [C, None], "current": 1},
    ]


def test_a_switch_names_the_kept_shown_tail_and_brings_the_chosen_tails_groups():
    groups = [
        {"index": 2, "versions": [A, None], "current": 1},
        {"index": 5, "versions": [B, None], "current": 1},
    ]
    inner = [
        {"index": 6, "versions": [None, D], "current": 0},
        {"index": 1, "versions": [None, D], "current": 0},
    ]
    assert version_rules.switch_to(groups, 2, 0, C, inner) == [
        {"index": 2, "versions": [None, C], "current": 0},
        {"index": 6, "versions": [None, D], "current": 0},
    ]
    assert groups[0]["versions"] == [A, None]  # the input is not changed


@pytest.mark.parametrize(
    ("version", "error"),
    [(2, BadRequest), (-1, BadRequest), (True, BadRequest), ("0", BadRequest), (1, Conflict)],
)
def test_a_switch_to_a_version_out_of_range_or_already_shown_is_refused(version, error):
    groups = [{"index": 2, "versions": [A, None], "current": 1}]
    with pytest.raises(error):
        version_rules.switch_to(groups, 2, version, C, [])


def test_a_switch_at_an_index_without_versions_is_refused():
    with pytest.raises(BadRequest):
        version_rules.switch_to([], 2, 0, C, [])


def test_dropping_from_an_index_drops_that_group_and_the_later_ones():
    groups = [
        {"index": 0, "versions": [A, None], "current": 1},
        {"index": 2, "versions": [B, None], "current": 1},
    ]
    assert version_rules.drop_from(groups, 2) == ([groups[0]], [groups[1]])
    assert version_rules.drop_from(groups, 0) == ([], groups)


@pytest.mark.parametrize(
    "bad",
    [
        {"index": 1, "versions": [A], "current": 0},  # one version is no choice
        {"index": 1, "versions": [A, B], "current": 0},  # the shown slot must be empty
        {"index": 1, "versions": [None, None], "current": 0},  # a hidden slot must name a file
        {"index": 1, "versions": ["../../etc", None], "current": 1},  # an id that is no file name of ours
        {"index": -1, "versions": [A, None], "current": 1},
        {"index": True, "versions": [A, None], "current": 1},
        {"index": 1, "versions": [A, None], "current": 2},
        "not a group",
    ],
)
def test_a_malformed_group_from_a_file_is_dropped(bad):
    good = {"index": 3, "versions": [A, None], "current": 1}
    assert version_rules.groups_of([bad, good]) == [good]


def test_groups_are_read_in_index_order_one_per_index():
    first = {"index": 3, "versions": [A, None], "current": 1}
    second = {"index": 3, "versions": [B, None], "current": 1}
    early = {"index": 1, "versions": [None, C], "current": 0}
    assert version_rules.groups_of([first, second, early]) == [early, first]
    assert version_rules.groups_of(None) == [] and version_rules.groups_of({"index": 1}) == []


def test_the_summary_says_each_groups_index_count_and_shown_version():
    groups = [{"index": 3, "versions": [A, None, B], "current": 1}]
    assert version_rules.summary(groups) == [{"index": 3, "count": 3, "current": 1}]
    assert version_rules.kept_ids(groups) == [A, B]

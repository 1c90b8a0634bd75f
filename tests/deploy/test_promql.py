"""The PromQL reader the query checks rely on: what it takes for a metric, and what it does not."""

from __future__ import annotations

import pytest

from tests.deploy.promql import Selector, read


def test_selectors_keep_their_matchers_and_grouping_labels_are_collected() -> None:
    reading = read('histogram_quantile(0.95, sum by (le, stage) (rate(kotae_handle_seconds_bucket{stage!=""}[5m])))')
    assert reading.selectors == [Selector("kotae_handle_seconds_bucket", 'stage!=""')]
    assert reading.grouping == {"le", "stage"}
    assert reading.selectors[0].label_names() == {"stage"}


def test_functions_aggregations_keywords_strings_and_durations_are_no_metrics() -> None:
    expr = (
        'label_replace(vector(1), "stage", "retriever", "", "") unless on (stage) (up{job="kotae"} == 1)\n'
        "or sum(increase(a_total[1h] offset 5m)) > bool max(b) and c"
    )
    assert [str(s) for s in read(expr).selectors] == ['up{job="kotae"}', "a_total", "b", "c"]
    assert read(expr).grouping == {"stage"}


def test_braces_inside_label_values_do_not_end_the_matchers() -> None:
    assert read('m{a="}{", b=~"x|y"} * on (a) group_left (c) n').selectors == [
        Selector("m", 'a="}{", b=~"x|y"'),
        Selector("n"),
    ]


def test_a_typo_is_read_as_the_metric_it_names() -> None:
    assert read("sum(rate(kotae_outcome_total[5m]))").metrics == {"kotae_outcome_total"}


def test_an_unclosed_selector_is_an_error() -> None:
    with pytest.raises(ValueError, match="unclosed"):
        read('m{a="b"')

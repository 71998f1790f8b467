from datetime import date, datetime

import pytest

from memory_runtime.memory.dates import (
    RelativeTime,
    find_relative_times,
    format_day,
    format_month,
    resolve_relative_times,
)

MONDAY = datetime(2023, 5, 8, 13, 56)  # LoCoMo dates a session "1:56 pm on 8 May, 2023"


def only(sentence: str, said_at: datetime = MONDAY) -> RelativeTime:
    found = find_relative_times(sentence, said_at)
    assert len(found) == 1, found
    return found[0]


def test_days_and_months_are_written_as_locomo_writes_them():
    assert format_day(date(2023, 5, 7)) == "7 May 2023"
    assert format_day(datetime(2023, 12, 31, 23, 59)) == "31 December 2023"
    assert format_month(date(2023, 5, 7)) == "May 2023"


@pytest.mark.parametrize(
    "said, resolved",
    [
        ("yesterday", "7 May 2023"),
        ("last night", "7 May 2023"),
        ("yesterday morning", "7 May 2023"),
        ("today", "8 May 2023"),
        ("tonight", "8 May 2023"),
        ("this morning", "8 May 2023"),
        ("this afternoon", "8 May 2023"),
        ("this evening", "8 May 2023"),
        ("tomorrow", "9 May 2023"),
        ("the day before yesterday", "6 May 2023"),
        ("the day after tomorrow", "10 May 2023"),
        ("3 days ago", "5 May 2023"),
        ("three days ago", "5 May 2023"),
        ("ten days ago", "28 April 2023"),
        ("a day ago", "7 May 2023"),
    ],
)
def test_a_named_day_resolves_to_that_day(said, resolved):
    found = only(f"I saw her {said} at the park")
    assert found.resolved == resolved
    assert format_day(found.day) == resolved


@pytest.mark.parametrize(
    "said, resolved",
    [
        ("a few days ago", "a few days before 8 May 2023"),
        ("a couple of days ago", "a couple of days before 8 May 2023"),
        ("the other day", "a few days before 8 May 2023"),
        ("recently", "shortly before 8 May 2023"),
        ("last week", "the week before 8 May 2023"),
        ("this past week", "the week before 8 May 2023"),
        ("this week", "the week of 8 May 2023"),
        ("next week", "the week after 8 May 2023"),
        ("last weekend", "the weekend before 8 May 2023"),
        ("this weekend", "the weekend of 8 May 2023"),
        ("next weekend", "the weekend after 8 May 2023"),
        ("two weekends ago", "two weekends before 8 May 2023"),
        ("two weeks ago", "two weeks before 8 May 2023"),
        ("3 weeks ago", "3 weeks before 8 May 2023"),
        ("a week ago", "a week before 8 May 2023"),
        ("a few months ago", "a few months before May 2023"),
        ("a few years ago", "a few years before 2023"),
    ],
)
def test_a_span_keeps_its_vagueness_anchored_at_the_day_said(said, resolved):
    found = only(f"I saw her {said} at the park")
    assert (found.resolved, found.day) == (resolved, None)


@pytest.mark.parametrize(
    "said, resolved",
    [
        ("last month", "April 2023"),
        ("this month", "May 2023"),
        ("next month", "June 2023"),
        ("three months ago", "February 2023"),
        ("six months ago", "November 2022"),
        ("last year", "2022"),
        ("this year", "2023"),
        ("next year", "2024"),
        ("ten years ago", "2013"),
        ("10 years ago", "2013"),
        ("a year ago", "2022"),
    ],
)
def test_months_and_years_resolve_to_the_calendar(said, resolved):
    assert only(f"We moved {said} to Boston").resolved == resolved


@pytest.mark.parametrize(
    "said, resolved",
    [
        ("last December", "December 2022"),  # not yet past in May: last year's
        ("last April", "April 2023"),
        ("last May", "May 2022"),  # said in May: the May before this one
        ("in March", "March 2023"),
        ("in May", "May 2023"),  # "in May" said in May: this one
        ("in December", "December 2022"),
        ("next June", "June 2023"),
        ("next May", "May 2024"),
        ("next February", "February 2024"),
    ],
)
def test_a_month_by_name_is_the_nearest_one_in_its_direction(said, resolved):
    assert only(f"We moved {said}.").resolved == resolved


@pytest.mark.parametrize(
    "said, resolved, day",
    [
        ("last Friday", "the Friday before 8 May 2023", date(2023, 5, 5)),
        ("on Friday", "the Friday before 8 May 2023", date(2023, 5, 5)),
        ("last Sunday", "the Sunday before 8 May 2023", date(2023, 5, 7)),
        ("last Monday", "the Monday before 8 May 2023", date(2023, 5, 1)),  # said on a Monday: a week before
        ("next Friday", "the Friday after 8 May 2023", date(2023, 5, 12)),  # this coming Friday
        ("next Monday", "the Monday after 8 May 2023", date(2023, 5, 15)),
    ],
)
def test_a_weekday_is_the_one_strictly_before_or_after_the_day_said(said, resolved, day):
    found = only(f"We met {said} for lunch")
    assert (found.resolved, found.day) == (resolved, day)


def test_last_sunday_said_on_a_sunday_is_the_sunday_a_week_before():
    found = only("I went hiking last Sunday", datetime(2023, 5, 14, 9, 0))
    assert (found.resolved, found.day) == ("the Sunday before 14 May 2023", date(2023, 5, 7))


@pytest.mark.parametrize(
    "sentence, said_at, resolved",
    [
        ("yesterday", datetime(2024, 1, 1, 10), "31 December 2023"),
        ("tomorrow", datetime(2023, 12, 31, 10), "1 January 2024"),
        ("yesterday", datetime(2024, 3, 1, 10), "29 February 2024"),
        ("last month", datetime(2024, 1, 15), "December 2023"),
        ("next month", datetime(2023, 12, 15), "January 2024"),
        ("two months ago", datetime(2024, 1, 31), "November 2023"),
        ("last Friday", datetime(2024, 1, 1), "the Friday before 1 January 2024"),
    ],
)
def test_month_and_year_boundaries(sentence, said_at, resolved):
    assert only(sentence, said_at).resolved == resolved


def test_last_friday_across_a_year_boundary_is_a_day_of_the_year_before():
    assert only("last Friday", datetime(2024, 1, 1)).day == date(2023, 12, 29)


@pytest.mark.parametrize(
    "said, said_at, gold",
    [
        ("yesterday", datetime(2023, 5, 8), "7 May 2023"),
        ("last year", datetime(2023, 5, 8), "2022"),
        ("last Sunday", datetime(2023, 5, 25), "The sunday before 25 May 2023"),
        ("last week", datetime(2023, 6, 9), "The week before 9 June 2023"),
        ("two weekends ago", datetime(2023, 7, 17), "two weekends before 17 July 2023"),
        ("last weekend", datetime(2023, 7, 17), "The weekend before 17 July 2023"),
        ("last Tuesday", datetime(2023, 7, 20), "The Tuesday before 20 July 2023"),
        ("last Friday", datetime(2023, 7, 15), "The Friday before 15 July 2023"),
        ("this week", datetime(2023, 8, 23), "The week of 23 August 2023"),
        ("last month", datetime(2023, 7, 2), "June 2023"),
    ],
)
def test_resolutions_match_locomo_gold_answers(said, said_at, gold):
    assert only(f"I did it {said}", said_at).resolved.casefold() == gold.casefold()


def test_matching_ignores_case_and_keeps_the_text_as_written():
    found = only("I painted it Last Year")
    assert (found.text, found.resolved) == ("Last Year", "2022")
    assert only("YESTERDAY was long").resolved == "7 May 2023"


@pytest.mark.parametrize(
    "sentence",
    [
        "todays special was great",
        "yesterdays news",
        "nowadays I cook",
        "the brand Notoday sells hats",
        "on Fridays I swim",
        "the mayhem in Mayfair",
        "the last week of the trip was calm",  # a span of the trip, not last week
        "we moved in May 2022",  # already a date
        "I saw her on Friday, 5 May",
        "I love painting sunsets.",
    ],
)
def test_words_that_only_contain_a_relative_time_are_not_matched(sentence):
    assert find_relative_times(sentence, MONDAY) == []
    assert resolve_relative_times(sentence, MONDAY) == sentence


def test_week_does_not_match_inside_weekend():
    found = only("I went camping last weekend")
    assert (found.text, found.resolved) == ("last weekend", "the weekend before 8 May 2023")


def test_the_longest_expression_wins():
    found = only("I met him the day before yesterday")
    assert (found.text, found.resolved) == ("the day before yesterday", "6 May 2023")
    assert only("we left yesterday evening").text == "yesterday evening"


def test_several_expressions_are_found_in_order_with_offsets():
    sentence = "Yesterday I booked it, last week I paid, on Friday I packed as in March, and next month I fly."
    found = find_relative_times(sentence, MONDAY)
    assert [f.text for f in found] == ["Yesterday", "last week", "on Friday", "in March", "next month"]
    assert [f.resolved for f in found] == [
        "7 May 2023",
        "the week before 8 May 2023",
        "the Friday before 8 May 2023",
        "March 2023",
        "June 2023",
    ]
    assert all(sentence[f.start : f.end] == f.text for f in found)
    assert [f.start for f in found] == sorted(f.start for f in found)


@pytest.mark.parametrize(
    "sentence",
    [
        "a  few   days ago",
        "Recently, in March and three weeks ago, THIS WEEKEND and the day after tomorrow",
        "since last year and 10 years ago",
    ],
)
def test_offsets_point_at_the_text(sentence):
    found = find_relative_times(sentence, MONDAY)
    assert found
    assert all(sentence[f.start : f.end] == f.text for f in found)


def test_finds_compare_by_what_they_say():
    assert find_relative_times("yesterday", MONDAY) == [RelativeTime("yesterday", 0, 9, "7 May 2023")]


@pytest.mark.parametrize(
    "sentence, resolved",
    [
        ("I went to a support group yesterday", "I went to a support group on 7 May 2023"),
        ("I painted it last year", "I painted it in 2022"),
        ("I started last week", "I started the week before 8 May 2023"),
        ("I went there a few years ago", "I went there a few years before 2023"),
        ("I left ten years ago", "I left in 2013"),
        ("We moved last month", "We moved in April 2023"),
        ("I saw them on Friday", "I saw them on the Friday before 8 May 2023"),
        ("We moved in March", "We moved in March 2023"),
        ("I've lived here since last year", "I've lived here since 2022"),
        ("It is due by tomorrow", "It is due by 9 May 2023"),
        ("Yesterday was my birthday", "7 May 2023 was my birthday"),
        ("yesterday's game was close", "7 May 2023's game was close"),
        ("Yesterday I ran", "On 7 May 2023 I ran"),
        ("Last week I ran", "The week before 8 May 2023 I ran"),
        ("I ran. Last year I swam", "I ran. In 2022 I swam"),
        ("Two weeks ago I quit", "Two weeks before 8 May 2023 I quit"),
        ("I quit Two Weeks Ago", "I quit two weeks before 8 May 2023"),
        (
            "Yesterday I booked it and next month I fly",
            "On 7 May 2023 I booked it and in June 2023 I fly",
        ),
    ],
)
def test_a_sentence_reads_on_with_its_times_resolved(sentence, resolved):
    assert resolve_relative_times(sentence, MONDAY) == resolved


def test_a_date_said_at_is_accepted_as_well_as_a_datetime():
    assert resolve_relative_times("see you tomorrow", date(2023, 5, 8)) == "see you on 9 May 2023"

"""RANKED order (app.ranking.scoring.rank_columns, what the feed's first page calls): the
documented score (freshness halving every HALF_LIFE_HOURS, engagement with a comment worth two
likes, the viewer's affinity to the author), the diversity cap of MAX_RUN posts in a row by
one author, a deterministic order, and the time budget the feed falls back on."""

from __future__ import annotations

import math
import random

import pytest

from app.ranking.scoring import (
    ENGAGEMENT_WEIGHT,
    HALF_LIFE_HOURS,
    MAX_RUN,
    RankingTimeout,
    rank_columns,
)
from tests.helpers import post_id_at

NOW = 1_790_000_000_000
HOUR = 3_600_000


def _post(hours_ago: float, author: int, likes: int = 0, comments: int = 0, seq: int = 0):
    return (post_id_at(NOW - round(hours_ago * HOUR), seq), author, likes, comments)


def ranked(posts, affinity=None, now: int = NOW, budget: float = 5.0) -> list[int]:
    """Post ids in ranked order; `posts` are (post id, author, likes, comments) rows."""
    columns = [list(c) for c in zip(*posts, strict=True)] if posts else [[], [], [], []]
    order = rank_columns(*columns, affinity or {}, now, budget)
    assert sorted(order) == list(range(len(posts)))  # a permutation: nothing added or lost
    return [posts[i][0] for i in order]


def test_with_equal_engagement_newer_posts_come_first() -> None:
    posts = [_post(3, author=1), _post(1, author=2), _post(2, author=3), _post(0, author=4)]
    assert ranked(posts) == sorted((p[0] for p in posts), reverse=True)


def test_engagement_buys_as_many_hours_as_the_formula_says() -> None:
    """10 likes multiply the score by 1 + w * ln(11): worth log2 of that in half-lives."""
    bought = HALF_LIFE_HOURS * math.log2(1 + ENGAGEMENT_WEIGHT * math.log1p(10))
    fresh = _post(0, author=1)
    liked_younger = _post(bought - 0.1, author=2, likes=10)
    liked_older = _post(bought + 0.1, author=3, likes=10)
    assert ranked([fresh, liked_younger]) == [liked_younger[0], fresh[0]]
    assert ranked([fresh, liked_older]) == [fresh[0], liked_older[0]]
    assert ranked([_post(48, author=2, likes=10), fresh])[0] == fresh[0]  # not a day's worth


def test_a_comment_weighs_two_likes_and_equal_scores_go_to_the_newer_id() -> None:
    # One millisecond, so the same freshness: ln(1 + 2 likes) == ln(1 + 1 comment).
    two_likes = _post(1, author=1, likes=2, seq=0)
    one_comment = _post(1, author=2, comments=1, seq=1)
    assert ranked([two_likes, one_comment]) == [one_comment[0], two_likes[0]]
    two_likes = _post(1, author=1, likes=2, seq=1)
    one_comment = _post(1, author=2, comments=1, seq=0)
    assert ranked([one_comment, two_likes]) == [two_likes[0], one_comment[0]]
    # A third like outweighs the comment, whatever the ids say.
    one_comment = _post(1, author=2, comments=1, seq=1)
    three_likes = _post(1, author=3, likes=3, seq=0)
    assert ranked([one_comment, three_likes]) == [three_likes[0], one_comment[0]]


def test_affinity_lifts_the_authors_the_viewer_engages_with() -> None:
    friend, stranger = 7, 8
    older = _post(1, author=friend)
    newer = _post(0, author=stranger)
    assert ranked([older, newer]) == [newer[0], older[0]]
    assert ranked([older, newer], affinity={friend: 5}) == [older[0], newer[0]]
    assert ranked([older, newer], affinity={stranger: 5}) == [newer[0], older[0]]


def test_no_author_holds_more_than_max_run_places_in_a_row() -> None:
    prolific = [_post(i * 0.1, author=1) for i in range(5)]  # the five freshest
    others = [_post(10 + i, author=2 + i) for i in range(2)]
    order = ranked(prolific + others)
    authors = {p[0]: p[1] for p in prolific + others}
    assert MAX_RUN == 2
    assert [authors[p] for p in order] == [1, 1, 2, 1, 1, 3, 1]
    # Within each author the score order stands; the others move up, not the reverse.
    assert [p for p in order if authors[p] == 1] == [p[0] for p in prolific]
    assert [p for p in order if authors[p] != 1] == [p[0] for p in others]


def test_when_one_author_is_left_the_run_goes_on() -> None:
    alone = [_post(i, author=1) for i in range(6)]
    assert ranked(alone) == [p[0] for p in alone]


def test_a_post_from_the_future_is_not_fresher_than_now() -> None:
    """Clock skew: ages below zero count as zero (no freshness bonus)."""
    ahead = _post(-12, author=1)  # would score twice a fresh post without the clamp
    liked = _post(0, author=2, likes=1)
    assert ranked([ahead, liked]) == [liked[0], ahead[0]]


def test_the_order_depends_on_the_posts_not_on_how_they_arrive() -> None:
    rng = random.Random(13)
    posts = [
        _post(
            rng.choice([0, 0.5, 1, 6, 24]),  # many equal ages: ties are common
            author=rng.randint(1, 6),
            likes=rng.choice([0, 0, 1, 2, 5]),
            comments=rng.choice([0, 0, 1]),
            seq=seq,
        )
        for seq in range(300)
    ]
    affinity = {1: 3, 4: 1}
    expected = ranked(posts, affinity)
    for _ in range(5):
        rng.shuffle(posts)
        assert ranked(posts, affinity) == expected


def test_past_its_budget_ranking_gives_up() -> None:
    """The feed catches RankingTimeout and serves the newest first (tests/feed)."""
    with pytest.raises(RankingTimeout):
        ranked([_post(0, author=1), _post(1, author=2)], budget=-1)
    assert ranked([]) == []

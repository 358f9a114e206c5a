"""A reader the profile does not describe (issue 48): each reply read or positional.

Pinned against an independent computation (every assignment of kinds to the replies and
every relevance of the documents, summed by brute force) and on scripted readers a person
can reason about, with the generic profile and the library defaults."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
import pytest

from gold_panning_integrations import DetectorProfile, GoldPanner, PanningConfig, Reading
from gold_panning_integrations.engine.priors import DEFAULT_RANK_MAP, RankMap
from gold_panning_integrations.engine.replies import SLOT_STRENGTH, Replies, reply_posterior

GENERIC = DetectorProfile.bundled("lost-in-the-middle")
PASSAGES = [f"Passage number {i} about subject {i}." for i in range(10)]


class FirstOr:
    """Cites what is shown first in a share ``first`` of its replies (seeded), otherwise
    every relevant passage shown."""

    def __init__(self, relevant: set[str], first: float, seed: int) -> None:
        self.relevant, self.first, self.rng = relevant, first, np.random.default_rng(seed)

    def read(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> Reading:
        if self.first and self.rng.random() < self.first:
            return Reading(cited=(0,))
        return Reading(cited=tuple(i for i, d in enumerate(documents) if d in self.relevant))


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


# ------------------------------------------------------------------ the sum, by brute force
def _brute_force(
    cited: list[list[int]], slots: list[list[int]], t: float, f: float, prior: list[float], omega: float
) -> tuple[list[float], list[float]]:
    """Posterior of each document and of each reply being positional, summed over every
    assignment of kinds and every relevance of the documents (no mixture: a = b = 0).
    Replies show every document; ``slots[r][i]`` is document ``i``'s slot in reply ``r``."""
    n, replies = len(prior), len(cited)
    k, m = n, 1.0 / n
    a0, b0 = 2 * omega, 2 * (1 - omega)
    total = 0.0
    post = [0.0] * n
    pos = [0.0] * replies
    for kinds in itertools.product((0, 1), repeat=replies):
        # nu integrated: Beta(a0 + #positional, b0 + #read) / Beta(a0, b0)
        p_kinds = math.exp(
            math.lgamma(a0 + sum(kinds))
            + math.lgamma(b0 + replies - sum(kinds))
            - math.lgamma(a0 + b0 + replies)
            - math.lgamma(a0)
            - math.lgamma(b0)
            + math.lgamma(a0 + b0)
        )
        # positional replies: each slot's rate integrated against Beta(kappa m, kappa (1 - m))
        p_pos = 1.0
        for j in range(k):
            c = sum(1 for r in range(replies) if kinds[r] and slots[r].index(j) in cited[r])
            s = sum(kinds)
            al, be = SLOT_STRENGTH * m, SLOT_STRENGTH * (1 - m)
            p_pos *= math.exp(
                math.lgamma(al + c)
                + math.lgamma(be + s - c)
                - math.lgamma(al + be + s)
                - math.lgamma(al)
                - math.lgamma(be)
                + math.lgamma(al + be)
            )
        for z in itertools.product((0, 1), repeat=n):
            p = p_kinds * p_pos
            for i in range(n):
                p *= prior[i] if z[i] else 1 - prior[i]
            for r in range(replies):
                if kinds[r]:
                    continue
                for i in range(n):
                    rate = t if z[i] else f
                    p *= rate if i in cited[r] else 1 - rate
            total += p
            for i in range(n):
                post[i] += p * z[i]
            for r in range(replies):
                pos[r] += p * kinds[r]
    return [x / total for x in post], [x / total for x in pos]


def test_the_sum_over_kinds_equals_a_brute_force_sum() -> None:
    # Two documents, three replies that each cite something; flat rates t = 0.8, f = 0.1.
    # Reply 0 cites document 0 at slot 0, reply 1 document 1 at slot 0, reply 2 document 0
    # at slot 1: the engine's sum, read through the same model, must match the brute force.
    t, f, prior, omega = 0.8, 0.1, [0.3, 0.2], 0.5
    cited = [[0], [1], [0]]
    slots = [[0, 1], [1, 0], [1, 0]]  # slots[r][i]: document i's slot in reply r
    replies = Replies()
    lr_c, lr_m = math.log(t / f), math.log((1 - t) / (1 - f))
    for c, sl in zip(cited, slots):
        shown = np.ones((1, 2), dtype=bool)
        cit = np.array([[i in c for i in range(2)]])
        replies.add(
            delta=np.where(cit, lr_c, lr_m),
            shown=shown,
            cited=cit,
            rates=np.stack([np.full((1, 2), t), np.full((1, 2), f)]),
            slots=np.array([sl]),
            spoke=np.array([True]),
            base=np.array([sum(math.log(f) if i in c else math.log(1 - f) for i in range(2))]),
        )
    lo, positional, _ = reply_posterior(
        replies,
        np.log(np.array([prior]) / (1 - np.array([prior]))),
        content_free=omega,
        false_lead_rate=0.0,
        blind_rate=0.0,
    )
    want_post, want_pos = _brute_force(cited, slots, t, f, prior, omega)
    assert (1 / (1 + np.exp(-lo[0]))).tolist() == pytest.approx(want_post, rel=1e-9)
    assert positional[0].tolist() == pytest.approx(want_pos, rel=1e-9)


# ------------------------------------------------------------------ scripted readers
def _world(first: float, *, relevant: bool, q: int = 60) -> tuple[list[float], list[float], int]:
    """Top posteriors, p_none and how often the relevant passage came first, over ``q``
    questions with one relevant passage at a uniform rank (or none)."""
    tops, nones, right = [], [], 0
    for i in range(q):
        rng = np.random.default_rng(1000 + i)
        g = int(rng.integers(10))
        rel = {PASSAGES[g]} if relevant else set()
        res = GoldPanner(FirstOr(rel, first, 1000 + i), GENERIC).run(f"question {i}?", PASSAGES)
        tops.append(float(res.posteriors.max()))
        nones.append(res.p_none)
        right += int(relevant and res.ranking[0] == g)
    return tops, nones, right


def test_a_reader_that_cites_whatever_comes_first_makes_no_confident_winner() -> None:
    # 90% of its replies cite the first passage shown (a different one from prompt to
    # prompt): before issue 48 a passage at 0.75 and p_none 0.13; now near the prior
    # (top sigmoid(-1.3802) = 0.201, p_none 0.50 for the rank map's first ten)
    tops, nones, _ = _world(0.9, relevant=False)
    assert np.mean(tops) <= 0.35 and np.mean(nones) >= 0.5


def test_replies_that_follow_the_positions_are_found_positional() -> None:
    res = GoldPanner(FirstOr(set(), 0.9, 3), GENERIC).run("question?", PASSAGES)
    assert res.reader_fit is not None and res.reader_fit < 0.3
    assert res.positional is not None and res.positional.max() > 0.8


def test_a_perfect_reader_keeps_its_evidence() -> None:
    tops, _, right = _world(0.0, relevant=True)
    assert right >= 58
    # its citations lift every winner above anything the prior gave (the rank map's first
    # rank, sigmoid(-1.3802) = 0.201), and it ends surer of its passage than a reader that
    # cites whatever comes first in 90% of its replies, in the same world
    assert min(tops) > _sigmoid(-1.3802)
    tops_first, _, _ = _world(0.9, relevant=True)
    assert np.mean(tops) > np.mean(tops_first)
    res = GoldPanner(FirstOr({PASSAGES[2]}, 0.0, 0), GENERIC).run("question?", PASSAGES)
    assert res.ranking[0] == 2 and res.reader_fit is not None and res.reader_fit > 0.75


def test_a_silent_reader_starts_and_ends_where_it_should_whatever_the_number_of_candidates() -> None:
    # One candidate starts at the rank map's first rank, not near certainty: the prior's
    # p_none is prod_r (1 - p_r) with the odds 0.251528 / (1 + r) (sigmoid(-1.3802 - log(1 + r))),
    # 0.799 for one candidate, 0.423 for 20. Six empty replies raise p_none from it at every
    # number of candidates (issue 48).
    def p_none(n: int) -> float:
        docs = PASSAGES[:n] if n <= 10 else [f"Passage {i}." for i in range(n)]
        return float(
            np.mean(
                [GoldPanner(FirstOr(set(), 0.0, i), GENERIC).run(f"q{i}?", docs).p_none for i in range(20)]
            )
        )

    def prior_none(n: int) -> float:
        return math.prod(1.0 - _sigmoid(-1.3802 - math.log(1 + r)) for r in range(n))

    assert prior_none(1) == pytest.approx(0.79902, abs=1e-5)
    assert prior_none(20) == pytest.approx(0.4232, abs=1e-4)
    one = p_none(1)
    assert one >= 0.7
    for n in (2, 4, 8):
        got = p_none(n)
        assert abs(got - one) <= 0.1 and got > prior_none(n), n
    # At 20 candidates the gap is 0.126 (0.975 against 0.849): the prior gives 20 candidates
    # more chance of holding something relevant (1 - 0.423 = 0.58 against 0.20 for one) and
    # silence does not undo it (docs/probabilities.md). It still raises p_none above the
    # prior's 0.423.
    assert p_none(20) > prior_none(20)


def test_the_reader_check_is_off_with_content_free_zero_and_from_the_uniform_prior() -> None:
    for options in ({"content_free": 0.0}, {"prior": "uniform", "retriever_prior": "none"}):
        res = GoldPanner(FirstOr(set(), 0.9, 3), GENERIC, **options).run("question?", PASSAGES)  # type: ignore[arg-type]
        assert res.reader_fit is None and res.positional is None


def test_self_citing_leaves_the_check_off_unless_content_free_is_set() -> None:
    # the two hypotheses would stack (docs/security.md): beside self_citing > 0 the option
    # left to the profile resolves to 0; set explicitly, or by the profile, it stays
    assert PanningConfig(self_citing=0.25).with_profile(None).content_free == 0.0
    assert PanningConfig().with_profile(None).content_free == 0.5
    assert PanningConfig(self_citing=0.25, content_free=0.5).with_profile(None).content_free == 0.5
    learned = GENERIC.model_copy(update={"content_free": 0.3})
    assert PanningConfig(self_citing=0.25).with_profile(learned).content_free == 0.3
    res = GoldPanner(FirstOr(set(), 0.9, 3), GENERIC, self_citing=0.25).run("question?", PASSAGES)
    assert res.reader_fit is None and res.positional is None
    both = GoldPanner(FirstOr(set(), 0.9, 3), GENERIC, self_citing=0.25, content_free=0.5).run(
        "question?", PASSAGES
    )
    assert both.reader_fit is not None


# ------------------------------------------------------------------ the rank map
def test_the_rank_map_by_hand() -> None:
    m = RankMap(log_rank=-1.0, offset=0.0)
    # sigmoid(0 - log(1 + r)) = 1 / (2 + r)
    assert m.probabilities(3).tolist() == pytest.approx([1 / 2, 1 / 3, 1 / 4])
    assert m.mass(3) == pytest.approx(13 / 12)
    # flat: the same chance that none is relevant, (1/2)(2/3)(3/4) = 1/4, spread evenly
    assert m.flat(3).tolist() == pytest.approx([1 - 0.25 ** (1 / 3)] * 3)
    shifted = m.with_mass(2.0, n=3)
    assert shifted.mass(3) == pytest.approx(2.0, abs=1e-9) and shifted.log_rank == -1.0
    assert RankMap.from_dict(m.to_dict()) == m


def test_the_default_rank_map_gives_even_odds_over_ten() -> None:
    none10 = float(np.prod(1 - DEFAULT_RANK_MAP.probabilities(10)))
    assert none10 == pytest.approx(0.5, abs=1e-3)
    # one candidate: sigmoid(-1.3802) = 0.251528 / 1.251528 = 0.20098 (p_none 0.80)
    assert DEFAULT_RANK_MAP.probabilities(1)[0] == pytest.approx(0.20098, abs=1e-5)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"log_rank": 1.0, "offset": 0.0}, "log_rank must be <= 0"),
        ({"log_rank": "x", "offset": 0.0}, "log_rank must be a finite number"),
        ({"offset": 0.0}, "missing \\['log_rank'\\]"),
        ({"log_rank": -1.0, "offset": 0.0, "slope": 1}, "unknown \\['slope'\\]"),
    ],
)
def test_a_bad_rank_map_is_refused_by_field(data: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RankMap.from_dict(data)
    with pytest.raises(ValueError, match=message):
        GENERIC.model_copy(update={"rank_map": None}).model_validate(
            {**GENERIC.model_dump(), "rank_map": data}
        )

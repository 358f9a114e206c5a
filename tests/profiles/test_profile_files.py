"""Hostile profile files (issue 10, item 5): each is a ProfileError naming the file and
the field, within a second, never a hang, a RecursionError or a UnicodeDecodeError."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from gold_panning_integrations import DetectorProfile, ProfileError, load_profile
from gold_panning_integrations.profiles import MAX_PROFILE_BYTES, SCHEMA_VERSION, RateCounts

GOOD = {"n_positions": 3, "tpr": [0.9, 0.5, 0.7], "fpr": [0.1, 0.3, 0.1]}


def _load_with_deadline(path: Path, seconds: float = 5.0) -> BaseException | None:
    """Load in a daemon thread; fail the test (instead of hanging) if it does not return."""
    box: list[BaseException | None] = []

    def target() -> None:
        try:
            DetectorProfile.load(path)
            box.append(None)
        except BaseException as err:  # noqa: BLE001 - the test inspects it
            box.append(err)

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        pytest.fail(f"loading {path} did not return within {seconds} s")
    return box[0]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs mkfifo")
def test_fifo_is_refused_without_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "profile.json"
    os.mkfifo(fifo)
    err = _load_with_deadline(fifo)
    assert isinstance(err, ProfileError)
    assert "FIFO" in str(err)
    assert str(fifo) in str(err)


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_symlink_to_dev_zero_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "profile.json"
    link.symlink_to("/dev/zero")
    err = _load_with_deadline(link)
    assert isinstance(err, ProfileError)
    assert "device" in str(err)
    assert str(link) in str(err)


def test_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="is a directory"):
        DetectorProfile.load(tmp_path)


def test_oversized_file_is_refused_before_reading(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with big.open("wb") as fh:
        fh.truncate(MAX_PROFILE_BYTES + 1)  # sparse: costs no disk
    with pytest.raises(ProfileError, match=r"more than the 5242880 read"):
        DetectorProfile.load(big)


def test_deep_nesting_is_a_profile_error_not_recursion(tmp_path: Path) -> None:
    p = tmp_path / "deep.json"
    p.write_text("[" * 100_000 + "]" * 100_000)
    err = _load_with_deadline(p)
    assert isinstance(err, ProfileError)
    assert "100000 levels deep" in str(err)


def test_deep_nesting_inside_a_field(tmp_path: Path) -> None:
    p = tmp_path / "deep-extra.json"
    p.write_text(json.dumps(GOOD)[:-1] + ', "extra": {"x": ' + "[" * 50_000 + "]" * 50_000 + "}}")
    with pytest.raises(ProfileError, match="levels deep"):
        DetectorProfile.load(p)


def test_brackets_inside_strings_do_not_count_as_nesting(tmp_path: Path) -> None:
    p = tmp_path / "notes.json"
    p.write_text(json.dumps({**GOOD, "notes": "[" * 1000 + '\\"{' * 100}))
    assert DetectorProfile.load(p).notes.startswith("[[[")


def test_invalid_utf8_is_a_profile_error(tmp_path: Path) -> None:
    p = tmp_path / "latin1.json"
    p.write_bytes(json.dumps({**GOOD, "model": "x"}).replace('"x"', '"caf\xe9"').encode("latin-1"))
    with pytest.raises(ProfileError, match=r"not UTF-8 text \(invalid byte at offset \d+\)") as exc:
        DetectorProfile.load(p)
    assert str(p) in str(exc.value)


def test_load_profile_by_path_string_uses_the_same_checks(tmp_path: Path) -> None:
    p = tmp_path / "bad.json"
    p.write_bytes(b"\xff\xfe")
    with pytest.raises(ProfileError, match="not UTF-8"):
        load_profile(str(p))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("n_positions", True),
        ("schema_version", True),
        ("grid_positions", [0, True]),
        ("trials", [False]),
        ("n_positions", 2.5),
    ],
)
def test_booleans_are_not_integers(tmp_path: Path, field: str, value: object) -> None:
    data: dict[str, object] = {**GOOD}
    if field == "grid_positions":
        data["grid_positions"] = value
    elif field == "trials":
        data.update(grid_positions=[0], trials=value)
    else:
        data[field] = value
    p = tmp_path / "p.json"
    p.write_text(json.dumps(data))
    with pytest.raises(ProfileError, match=rf"{field}.*must be an integer") as exc:
        DetectorProfile.load(p)
    assert str(p) in str(exc.value)


def test_n_positions_true_with_one_rate_is_refused(tmp_path: Path) -> None:
    # The case from the issue: a one-position profile whose n_positions is `true`.
    p = tmp_path / "one.json"
    p.write_text('{"n_positions": true, "tpr": [0.9], "fpr": [0.1]}')
    with pytest.raises(ProfileError) as exc:
        DetectorProfile.load(p)
    assert str(exc.value) == (
        f"profile file {str(p)!r}: invalid detector profile: n_positions: n_positions must be an integer, "
        "got the boolean True"
    )


@pytest.mark.parametrize("field", ["gold_cited", "distractor_shown"])
def test_booleans_are_not_counts(field: str) -> None:
    counts = {
        "positions": [0],
        "gold_cited": [1],
        "gold_shown": [2],
        "distractor_cited": [0],
        "distractor_shown": [4],
    }
    counts[field] = [True]
    with pytest.raises(ProfileError, match=rf"counts\.{field}\[0\] = True is not a finite number"):
        DetectorProfile(**GOOD, counts=counts)  # type: ignore[arg-type]


def test_schema_1_still_loads_and_old_counts_are_read(tmp_path: Path) -> None:
    data = {
        **GOOD,
        "schema_version": 1,
        "grid_positions": [0, 2],
        "extra": {"counts": {"tp": [9, 7], "tp_trials": [10, 10], "fp": [1, 1], "fp_trials": [10, 10]}},
    }
    p = tmp_path / "v1.json"
    p.write_text(json.dumps(data))
    prof = DetectorProfile.load(p)
    assert prof.schema_version == SCHEMA_VERSION == 3  # migrated on load
    c = prof.rate_counts()
    assert c is not None
    assert c.positions == [0, 2]
    assert c.gold_cited == [9.0, 7.0]


def test_schema_2_round_trips_counts(tmp_path: Path) -> None:
    counts = RateCounts(
        positions=[0, 2],
        gold_cited=[9, 7.5],
        gold_shown=[10, 10],
        distractor_cited=[1, 1],
        distractor_shown=[20, 20],
    )
    prof = DetectorProfile(**GOOD, counts=counts)  # type: ignore[arg-type]
    out = prof.save(tmp_path / "v2.json")
    back = DetectorProfile.load(out)
    assert back.schema_version == SCHEMA_VERSION == 3
    assert back.counts == counts


def test_counts_cited_above_shown_is_refused() -> None:
    with pytest.raises(
        ProfileError, match=r"counts\.gold_cited\[0\] = 3\.0 exceeds counts\.gold_shown\[0\] = 2\.0"
    ):
        RateCounts(positions=[0], gold_cited=[3], gold_shown=[2], distractor_cited=[0], distractor_shown=[1])


def test_unknown_schema_version_names_supported_ones() -> None:
    with pytest.raises(ProfileError, match="reads versions 1, 2, 3"):
        DetectorProfile(**GOOD, schema_version=4)  # type: ignore[arg-type]


# ------------------------------------------------------------- schema 3: typed learned values
LEARNED = {"blind_rate": 0.36, "false_leads": 1.5, "prior_head_decay": 0.05, "evidence_temperature": 2.0}


@pytest.mark.parametrize("version", [1, 2])
def test_learned_values_under_extra_are_migrated_on_load(tmp_path: Path, version: int) -> None:
    data = {**GOOD, "schema_version": version, "extra": {**LEARNED, "fitted_by": "em"}}
    p = tmp_path / "old.json"
    p.write_text(json.dumps(data))
    prof = DetectorProfile.load(p)
    assert prof.schema_version == 3
    assert (prof.blind_rate, prof.false_leads, prof.prior_head_decay, prof.evidence_temperature) == (
        0.36,
        1.5,
        0.05,
        2.0,
    )
    assert prof.extra == {"fitted_by": "em"}
    # written back as schema 3, with the typed fields, and read back the same
    back = DetectorProfile.load(prof.save(tmp_path / "new.json"))
    assert back == prof
    saved = json.loads((tmp_path / "new.json").read_text())
    assert saved["schema_version"] == 3 and saved["blind_rate"] == 0.36 and "blind_rate" not in saved["extra"]


def test_learned_values_are_typed_fields_read_by_the_engine() -> None:
    from gold_panning_integrations import PanningConfig

    prof = DetectorProfile(**GOOD, **LEARNED)  # type: ignore[arg-type]
    cfg = PanningConfig().with_profile(prof)
    assert (cfg.blind_rate, cfg.false_leads, cfg.prior_head_decay, cfg.evidence_temperature) == (
        0.36,
        1.5,
        0.05,
        2.0,
    )
    bare = DetectorProfile(**GOOD)  # type: ignore[arg-type]
    assert (bare.blind_rate, bare.false_leads, bare.prior_head_decay, bare.evidence_temperature) == (
        None,
    ) * 4


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("blind_rate", 1.0, r"blind_rate: must be a number in \[0, 1\), got 1.0"),
        ("false_leads", -0.5, r"false_leads: must be a number in \[0, inf\), got -0.5"),
        ("prior_head_decay", 0, r"prior_head_decay: must be a number in \(0, 1\], got 0"),
        ("evidence_temperature", "hot", r"evidence_temperature: must be a number in \(0, inf\), got 'hot'"),
        ("blind_rate", True, r"blind_rate: must be a number in \[0, 1\), got True"),
    ],
)
def test_learned_fields_are_validated_by_name(field: str, value: object, message: str) -> None:
    with pytest.raises(ProfileError, match=message):
        DetectorProfile(**GOOD, **{field: value})  # type: ignore[arg-type]


def test_a_learned_value_given_twice_is_refused() -> None:
    with pytest.raises(
        ProfileError, match=r"blind_rate is given both as a field and in extra\['blind_rate'\]"
    ):
        DetectorProfile(**GOOD, blind_rate=0.1, extra={"blind_rate": 0.2})  # type: ignore[arg-type]


def test_the_bundled_labelled_profile_loads_its_learned_values_typed() -> None:
    prof = load_profile("smollm2-135m-nq-labelled")
    # Refitted for issue 42 on the 20 calibration-split traces in docs/runs.
    assert (prof.blind_rate, prof.false_leads, prof.prior_head_decay) == (0.353, 1.1408, 0.29)
    assert (prof.expected_relevant, prof.silent_rate, prof.prior_temperature) == (0.75, 0.0, 0.5)
    assert "blind_rate" not in prof.extra and prof.extra["mixture_fit"]["queries"] == 20

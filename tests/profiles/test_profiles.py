"""Detector profiles: grid interpolation, resampling, JSON I/O, bundled profiles, errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from gold_panning_integrations import (
    DetectorProfile,
    GoldPanner,
    ProfileError,
    bundled_profiles,
    load_profile,
)
from gold_panning_integrations.engine import grid_positions, interpolate_grid, resample_curve
from gold_panning_integrations.profiles import SCHEMA_VERSION


def _profile(**kw: object) -> DetectorProfile:
    base: dict[str, object] = {"n_positions": 3, "tpr": [0.9, 0.5, 0.7], "fpr": [0.1, 0.3, 0.1]}
    base.update(kw)
    return DetectorProfile(**base)  # type: ignore[arg-type]


# ------------------------------------------------------------------ grid interpolation
def test_from_grid_interpolates_linearly_by_hand() -> None:
    # Grid 0, 2, 4 with TPR 0.9, 0.5, 0.7: position 1 is halfway between 0.9 and 0.5
    # (0.7), position 3 halfway between 0.5 and 0.7 (0.6). FPR 0.1, 0.3, 0.1 gives
    # 0.2 at both 1 and 3.
    p = DetectorProfile.from_grid(
        [0, 2, 4],
        [0.9, 0.5, 0.7],
        [0.1, 0.3, 0.1],
        n_positions=5,
        trials=[50, 50, 40],
        model="m",
        task="kv",
        notes="hand",
    )
    assert p.tpr == pytest.approx([0.9, 0.7, 0.5, 0.6, 0.7], abs=1e-12)
    assert p.fpr == pytest.approx([0.1, 0.2, 0.3, 0.2, 0.1], abs=1e-12)
    assert p.n_positions == 5
    assert p.grid_positions == [0, 2, 4] and p.trials == [50, 50, 40]
    assert (p.model, p.task, p.notes) == ("m", "kv", "hand")


def test_from_grid_uneven_grid_and_ends_outside_the_grid() -> None:
    # Grid 1, 4 (TPR 0.2 -> 0.8 over 3 steps = +0.2 per position); position 0 takes the
    # first grid value and position 5 the last.
    p = DetectorProfile.from_grid([1, 4], [0.2, 0.8], [0.1, 0.1], n_positions=6)
    assert p.tpr == pytest.approx([0.2, 0.2, 0.4, 0.6, 0.8, 0.8], abs=1e-12)


def test_from_grid_on_the_paper_grid() -> None:
    g = grid_positions(100)
    assert g.tolist() == [0, 10, 20, 30, 40, 50, 59, 69, 79, 89, 99]
    vals = np.linspace(0.9, 0.4, 11)
    p = DetectorProfile.from_grid(g, vals, np.full(11, 0.05), n_positions=100)
    assert np.asarray(p.tpr)[g] == pytest.approx(vals, abs=1e-12)
    # Position 5 lies halfway between grid points 0 and 10.
    assert p.tpr[5] == pytest.approx((vals[0] + vals[1]) / 2)


@pytest.mark.parametrize(
    ("grid", "tpr", "pattern"),
    [
        ([2, 0, 4], [0.5, 0.5, 0.5], "increasing"),
        ([0, 2], [0.5, 0.5, 0.5], "equal length"),
        ([0, 2, 4], [0.5, 1.5, 0.5], r"tpr\[2\] = 1\.5 is outside"),
    ],
)
def test_from_grid_errors(grid: list[int], tpr: list[float], pattern: str) -> None:
    with pytest.raises(ProfileError, match=pattern):
        DetectorProfile.from_grid(grid, tpr, [0.1] * len(tpr), n_positions=5)


def test_interpolate_grid_directly() -> None:
    assert interpolate_grid([0, 3], [0.0, 0.3], 4) == pytest.approx([0.0, 0.1, 0.2, 0.3])


# ------------------------------------------------------------------ resampling
def test_resample_three_to_five_by_relative_position() -> None:
    # Old depths 0, 1/2, 1 with 0.9, 0.5, 0.7; new depths 0, 1/4, 1/2, 3/4, 1:
    # 0.9, (0.9+0.5)/2 = 0.7, 0.5, (0.5+0.7)/2 = 0.6, 0.7.
    p = _profile().resample(5)
    assert p.n_positions == 5
    assert p.tpr == pytest.approx([0.9, 0.7, 0.5, 0.6, 0.7], abs=1e-12)
    assert p.fpr == pytest.approx([0.1, 0.2, 0.3, 0.2, 0.1], abs=1e-12)
    assert p.grid_positions is None and p.trials is None
    assert "resampled from 3 positions" in p.notes


def test_resample_five_to_three_and_two() -> None:
    five = [0.9, 0.7, 0.5, 0.6, 0.7]
    # New depths 0, 1/2, 1 fall exactly on old positions 0, 2, 4.
    assert resample_curve(five, 3) == pytest.approx([0.9, 0.5, 0.7])
    # Two positions keep the first and the last.
    assert resample_curve(five, 2) == pytest.approx([0.9, 0.7])
    # Five to four: depths 0, 1/3, 2/3, 1 -> old index 0, 4/3, 8/3, 4:
    # 0.9, 0.7 + (1/3)(0.5-0.7) = 0.6333, 0.5 + (2/3)(0.6-0.5) = 0.5667, 0.7.
    assert resample_curve(five, 4) == pytest.approx([0.9, 0.7 - 0.2 / 3, 0.5 + 0.2 / 3, 0.7])


def test_resample_edge_sizes() -> None:
    p = _profile()
    assert p.resample(3) is p
    assert p.resample(1).tpr == [0.9]  # one shown document sits at the first position
    assert DetectorProfile(n_positions=1, tpr=[0.4], fpr=[0.1]).resample(4).tpr == [0.4] * 4
    with pytest.raises(ProfileError, match="0"):
        p.resample(0)


def test_resample_100_to_37_keeps_the_ends() -> None:
    p = DetectorProfile.bundled("lost-in-the-middle")
    q = p.resample(37)
    assert q.n_positions == 37 and len(q.tpr) == 37
    assert q.tpr[0] == p.tpr[0] and q.tpr[-1] == p.tpr[-1]
    assert q.fpr[0] == p.fpr[0] and q.fpr[-1] == p.fpr[-1]
    # Position 18 of 37 is depth 1/2 -> old index 49.5: mean of old 49 and 50.
    assert q.tpr[18] == pytest.approx((p.tpr[49] + p.tpr[50]) / 2)


# ------------------------------------------------------------------ JSON I/O
def test_save_load_round_trip(tmp_path: Path) -> None:
    p = DetectorProfile.from_grid(
        [0, 2, 4],
        [0.9, 0.5, 0.7],
        [0.1, 0.3, 0.1],
        n_positions=5,
        trials=[10, 10, 10],
        model="m",
        task="kv",
        notes="n",
        extra={"evidence_temperature": 1.5},
    )
    path = p.save(tmp_path / "p.json")
    assert path == tmp_path / "p.json"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["p.json"]  # no temp file left
    q = DetectorProfile.load(path)
    assert q == p
    data = json.loads(path.read_text())
    assert data["schema_version"] == SCHEMA_VERSION == 3
    # a learned value given under extra (the schema-2 place) becomes the typed field
    assert q.evidence_temperature == 1.5 and "evidence_temperature" not in q.extra
    assert data["evidence_temperature"] == 1.5
    assert set(data) >= {
        "schema_version",
        "model",
        "task",
        "n_positions",
        "tpr",
        "fpr",
        "grid_positions",
        "trials",
        "created",
        "notes",
    }


def test_json_accepts_numpy_arrays_for_rates() -> None:
    p = DetectorProfile(n_positions=2, tpr=np.array([0.5, 0.6]), fpr=np.array([0.1, 0.2]))
    assert p.tpr == [0.5, 0.6]


def test_rates_as_a_list_of_numpy_scalars_are_accepted() -> None:
    p = DetectorProfile(n_positions=2, tpr=[np.float32(0.5), np.float64(0.6)], fpr=[np.int64(0), 0.2])
    assert p.tpr == pytest.approx([0.5, 0.6])


# ------------------------------------------------------------------ bundled
def test_bundled_lost_in_the_middle_loads_and_says_how_it_was_made() -> None:
    assert "lost-in-the-middle" in bundled_profiles()
    p = DetectorProfile.bundled("lost-in-the-middle")
    assert p.n_positions == 100 == len(p.tpr) == len(p.fpr)
    assert p.is_informative
    assert p.notes and "from_grid" in p.notes and "grid" in p.notes.lower()
    # U-shaped: first and last positions more diagnostic than the middle.
    d = p.diagnosticity
    assert d[0] > d[50] < d[99]
    # The notes say it was made by linear interpolation of its grid: check that it is.
    g = p.grid_positions
    assert g is not None and len(g) == 11
    remade = DetectorProfile.from_grid(g, np.asarray(p.tpr)[g], np.asarray(p.fpr)[g], n_positions=100)
    assert remade.tpr == pytest.approx(p.tpr, abs=1e-12)
    assert remade.fpr == pytest.approx(p.fpr, abs=1e-12)


def test_unknown_bundled_name_lists_the_available_ones() -> None:
    with pytest.raises(ProfileError, match="lost-in-the-middle"):
        DetectorProfile.bundled("no-such-profile")


# ------------------------------------------------------------------ errors name field and value
@pytest.mark.parametrize(
    ("kwargs", "patterns"),
    [
        ({"n_positions": 3, "tpr": [0.5, 0.5], "fpr": [0.1] * 3}, ["tpr", "2 values", "3"]),
        ({"n_positions": 3, "tpr": [0.5] * 3, "fpr": [0.1] * 4}, ["fpr", "4 values", "3"]),
        ({"n_positions": 3, "tpr": [0.5, 1.5, 0.5], "fpr": [0.1] * 3}, [r"tpr\[1\]", "1.5", r"\[0, 1\]"]),
        ({"n_positions": 3, "tpr": [0.5] * 3, "fpr": [-0.1, 0.1, 0.1]}, [r"fpr\[0\]", "-0.1"]),
        ({"n_positions": 3, "tpr": [0.5, 0.5, float("nan")], "fpr": [0.1] * 3}, [r"tpr\[2\]", "nan"]),
        ({"n_positions": 1, "tpr": ["x"], "fpr": [0.1]}, [r"tpr\[0\]", "'x'"]),
        ({"n_positions": 1, "tpr": [True], "fpr": [0.1]}, [r"tpr\[0\]", "True"]),
        ({"n_positions": 0, "tpr": [], "fpr": []}, ["tpr", "empty"]),
        ({"n_positions": 1, "tpr": [0.5], "fpr": [0.1], "schema_version": 4}, ["schema_version", "4"]),
        ({"n_positions": 1, "tpr": [0.5], "fpr": [0.1], "tprr": [0.1]}, ["tprr"]),
        (
            {"n_positions": 2, "tpr": [0.5] * 2, "fpr": [0.1] * 2, "grid_positions": [1, 0]},
            ["grid_positions"],
        ),
    ],
)
def test_invalid_profiles_name_field_and_value(kwargs: dict, patterns: list[str]) -> None:
    with pytest.raises(ProfileError) as info:
        DetectorProfile(**kwargs)
    for pat in patterns:
        assert re.search(pat, str(info.value)), (pat, str(info.value))
    assert isinstance(info.value, ValueError)  # `except ValueError` keeps working


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "profile.json"
    path.write_text(text)
    return path


def test_truncated_json_file(tmp_path: Path) -> None:
    full = _profile().to_json()
    path = _write(tmp_path, full[: len(full) // 2])
    with pytest.raises(ProfileError, match="truncated") as info:
        DetectorProfile.load(path)
    assert str(path) in str(info.value)


def test_non_object_json_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "[0.5, 0.5]")
    with pytest.raises(ProfileError, match="JSON object.*list"):
        DetectorProfile.load(path)


def test_nan_inside_a_json_file_names_the_field(tmp_path: Path) -> None:
    data = json.loads(_profile().to_json())
    text = json.dumps(data).replace("0.3", "NaN", 1)  # json writes/reads NaN literally
    path = _write(tmp_path, text)
    with pytest.raises(ProfileError, match=r"fpr\[1\] = nan") as info:
        DetectorProfile.load(path)
    assert str(path) in str(info.value)


def test_unknown_schema_version_in_a_file(tmp_path: Path) -> None:
    data = json.loads(_profile().to_json())
    data["schema_version"] = 99
    path = _write(tmp_path, json.dumps(data))
    with pytest.raises(ProfileError, match="schema_version 99"):
        load_profile(path)


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.json"
    with pytest.raises(ProfileError, match="nope.json"):
        DetectorProfile.load(path)
    with pytest.raises(ProfileError, match="nope.json"):
        load_profile(str(path))


# ------------------------------------------------------------------ load_profile
def test_load_profile_by_object_name_and_path(tmp_path: Path) -> None:
    p = _profile()
    assert load_profile(p) is p
    assert load_profile("lost-in-the-middle") == DetectorProfile.bundled("lost-in-the-middle")
    path = p.save(tmp_path / "mine.json")
    assert load_profile(path) == p
    assert load_profile(str(path)) == p


def test_load_profile_refuses_unknown_names_and_types() -> None:
    with pytest.raises(ProfileError, match="neither a bundled profile"):
        load_profile("not-a-profile")
    with pytest.raises(ProfileError, match="int"):
        load_profile(3)  # type: ignore[arg-type]


def test_panner_accepts_a_profile_path(tmp_path: Path) -> None:
    path = _profile().save(tmp_path / "p.json")
    panner = GoldPanner(None, profile=str(path))
    assert list(panner.profile.tpr) == [0.9, 0.5, 0.7]
    with pytest.raises(ProfileError):
        GoldPanner(None, profile=str(tmp_path / "missing.json"))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"blind_rate": 1.0}, r"extra\['blind_rate'\] must be a number in \[0, 1\), got 1.0"),
        ({"blind_rate": None}, r"extra\['blind_rate'\] must be a number in \[0, 1\), got None"),
        ({"false_leads": -0.5}, r"extra\['false_leads'\] must be a number in \[0, inf\), got -0.5"),
        ({"prior_head_decay": 0}, r"extra\['prior_head_decay'\] must be a number in \(0, 1\], got 0"),
        (
            {"evidence_temperature": "hot"},
            r"extra\['evidence_temperature'\] must be a number in \(0, inf\), got 'hot'",
        ),
    ],
)
def test_measured_extras_are_validated_at_load(
    tmp_path: Path, extra: dict[str, object], message: str
) -> None:
    d = json.loads(load_profile("smollm2-135m-nq-labelled").to_json())
    d["extra"].update(extra)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(d))
    with pytest.raises(ProfileError, match=r"p\.json.*" + message):
        load_profile(path)
    # other, free-form extras stay free-form
    d["extra"] = {"note": [1, "x"], "fitted_by": None}
    path.write_text(json.dumps(d))
    assert load_profile(path).extra["fitted_by"] is None

"""A CSV data file with a header row is refused with a fix that names the header."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpledger.cli import main
from dpledger.commands._inputs import load_data
from dpledger.core.errors import InvalidParameterError

HEADER_FIX = "remove it (dpledger reads numeric CSV without a header)"


@pytest.mark.parametrize("text", ["x,y\n1,2\n3,4\n", "# rows\n\n a , 2\n1,2\n", "1.5,label\n1,2\n"])
def test_a_header_row_is_named(tmp_path: Path, text: str) -> None:
    (tmp_path / "rows.csv").write_text(text)
    with pytest.raises(InvalidParameterError) as err:
        load_data(tmp_path / "rows.csv")
    assert err.value.field == "data"
    assert "the first row looks like a header" in err.value.problem
    assert err.value.fix == HEADER_FIX


@pytest.mark.parametrize("text", ["1,2\nx,y\n", "1,,2\n3,4,5\n", '"1","2"\n3,4\n'])
def test_other_bad_rows_keep_the_generic_fix(tmp_path: Path, text: str) -> None:
    (tmp_path / "rows.csv").write_text(text)
    with pytest.raises(InvalidParameterError) as err:
        load_data(tmp_path / "rows.csv")
    assert "header" not in str(err.value) and "not a numeric CSV table" in err.value.problem


def test_dpledger_run_prints_one_line_and_exits_2(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "rows.csv").write_text("answer\n0.5\n")
    config = tmp_path / "run.toml"
    config.write_text('data = "rows.csv"\n[params]\nsensitivity = 1.0\nnoise_multiplier = 1.0\n')
    out = tmp_path / "out"
    assert main(["run", "gaussian_mechanism", "--config", str(config), "--out", str(out)]) == 2
    err = capfd.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "rows.csv: the first row looks like a header" in err and HEADER_FIX in err
    assert not out.exists()

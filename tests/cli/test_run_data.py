"""``dpledger run`` data files: ragged or malformed data is one error naming the field."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dpledger.cli import main
from dpledger.commands._inputs import load_data
from dpledger.core.errors import InvalidParameterError


@pytest.mark.parametrize(
    ("name", "text", "field", "words"),
    [
        ("a.csv", "1,2\n3\n", "data", "columns changed from 2 to 1 at row 2"),
        ("b.json", "[[1, 2], [3]]", "data[1]", "has 1 values where data[0] has 2"),
        ("c.json", '{"x": [[1, 2], [3, 4, 5]]}', "data['x'][1]", "has 3 values"),
        ("d.json", "{bad", "data", "not valid JSON"),
    ],
)
def test_ragged_or_malformed_data_names_the_field(
    tmp_path: Path, name: str, text: str, field: str, words: str
) -> None:
    (tmp_path / name).write_text(text)
    with pytest.raises(InvalidParameterError) as err:
        load_data(tmp_path / name)
    assert err.value.field == field and words in str(err.value)
    assert "usecols" not in str(err.value)


def test_regular_data_loads(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("1,2\n3,4\n")
    (tmp_path / "b.json").write_text('{"x": [[1, 2], [3, 4]]}')
    assert load_data(tmp_path / "a.csv").tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert np.asarray(load_data(tmp_path / "b.json")["x"]).shape == (2, 2)


def test_the_cli_prints_one_line_and_writes_nothing(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "rows.csv").write_text("0.1,0.2\n0.3\n")
    config = tmp_path / "run.toml"
    config.write_text('data = "rows.csv"\n[params]\nsensitivity = 1.0\nnoise_multiplier = 1.0\n')
    out = tmp_path / "out"
    assert main(["run", "gaussian_mechanism", "--config", str(config), "--out", str(out)]) == 2
    err = capfd.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "rows.csv" in err and "Fix:" in err
    assert not out.exists()

"""RECORD rows rewritten one at a time: every other line keeps its bytes and line ending."""

from __future__ import annotations

import pytest

from patcher.outputs import record

PIP_STYLE = (
    b"vllm/a.py,sha256=old,3\r\n"
    b'"vllm/E=1,N=2.json",sha256=x,9\r\n'
    b"vllm/__pycache__/a.cpython-311.pyc,,\r\n"
    b"vllm-0.16.0.dist-info/RECORD,,\r\n"
)


def test_a_replaced_row_takes_the_file_s_line_ending_and_the_rest_keep_their_bytes():
    new = record.rewrite(
        PIP_STYLE,
        {
            "vllm/a.py": record.RecordRow("vllm/a.py", "sha256=new", "4"),
            "vllm/__pycache__/a.cpython-311.pyc": None,
        },
        [record.RecordRow("vllm-0.16.0.dist-info/patcher-provenance.json", "sha256=p", "7")],
    )
    assert new == (
        b"vllm/a.py,sha256=new,4\r\n"
        b'"vllm/E=1,N=2.json",sha256=x,9\r\n'
        b"vllm-0.16.0.dist-info/RECORD,,\r\n"
        b"vllm-0.16.0.dist-info/patcher-provenance.json,sha256=p,7\r\n"
    )


def test_rows_parse_quoted_paths_and_empty_hashes():
    rows = record.parse_record(PIP_STYLE, "RECORD")
    assert rows["vllm/E=1,N=2.json"] == ("sha256=x", "9")
    assert rows["vllm/__pycache__/a.cpython-311.pyc"] == ("", "")


def test_the_hash_is_urlsafe_base64_without_padding():
    # sha256 of b"" is e3b0c442...; its urlsafe base64 has one '=' of padding to drop.
    assert record.record_hash(b"") == "sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "vllm/a.py: listed in RECORD but missing"),
        (b"abcd", "vllm/a.py: 4 bytes, RECORD says 3"),
        (b"abd", "vllm/a.py: hash differs from RECORD"),
        (b"abc", None),
    ],
)
def test_a_row_names_what_is_wrong_with_its_file(tmp_path, content, problem):
    if content is not None:
        (tmp_path / "vllm").mkdir()
        (tmp_path / "vllm/a.py").write_bytes(content)
    assert record.RecordRow.of("vllm/a.py", b"abc").problem(tmp_path) == problem

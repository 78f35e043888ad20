"""RECORD's one model (``patcher.records``): rows with parsed hashes, every bad row named at
once, rows rewritten one at a time with every other line keeping its bytes and line ending."""

from __future__ import annotations

import pytest

from patcher import records
from patcher.records import Hash, InvalidRecord, RecordRow

PIP_STYLE = (
    b"vllm/a.py,sha256=old,3\r\n"
    b'"vllm/E=1,N=2.json",sha256=x,9\r\n'
    b"vllm/__pycache__/a.cpython-311.pyc,,\r\n"
    b"vllm-0.16.0.dist-info/RECORD,,\r\n"
)


def test_a_replaced_row_takes_the_file_s_line_ending_and_the_rest_keep_their_bytes():
    new = records.rewrite(
        PIP_STYLE,
        {
            "vllm/a.py": RecordRow("vllm/a.py", Hash("sha256", "new"), 4),
            "vllm/__pycache__/a.cpython-311.pyc": None,
        },
        [RecordRow("vllm-0.16.0.dist-info/patcher-provenance.json", Hash("sha256", "p"), 7)],
        "RECORD",
    )
    assert new == (
        b"vllm/a.py,sha256=new,4\r\n"
        b'"vllm/E=1,N=2.json",sha256=x,9\r\n'
        b"vllm-0.16.0.dist-info/RECORD,,\r\n"
        b"vllm-0.16.0.dist-info/patcher-provenance.json,sha256=p,7\r\n"
    )


def test_rows_parse_quoted_paths_and_empty_hashes():
    rows = records.read_record(PIP_STYLE, "RECORD")
    assert rows["vllm/E=1,N=2.json"] == RecordRow("vllm/E=1,N=2.json", Hash("sha256", "x"), 9)
    assert rows["vllm/__pycache__/a.cpython-311.pyc"].hash is None
    assert rows["vllm/__pycache__/a.cpython-311.pyc"].size is None


def test_the_hash_is_urlsafe_base64_without_padding():
    # sha256 of b"" is e3b0c442...; its urlsafe base64 has one '=' of padding to drop.
    assert str(Hash.of(b"")) == "sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"
    assert Hash.parse(str(Hash.of(b"abc"))).validate(b"abc")
    assert not Hash.of(b"abc").validate(b"abd")


@pytest.mark.parametrize("text", ["", "sha256=", "=abc", "crc32=abc", "sha256"])
def test_a_hash_that_is_not_name_and_digest_is_refused(text):
    with pytest.raises(ValueError, match="is not name=digest with a hashlib algorithm"):
        Hash.parse(text)


def test_every_bad_row_of_a_record_is_named_in_one_error():
    data = (
        b"vllm/a.py,sha256=old,3\n"
        b"vllm/b.py,sha256=x\n"  # two fields
        b"vllm/c.py,md5x=abc,3\n"  # no such algorithm
        b"vllm/d.py,sha256=x,three\n"  # not a size
        b",sha256=x,-1\n"  # no path, a negative size
    )
    with pytest.raises(InvalidRecord) as raised:
        records.read_record(data, "x.whl")
    assert raised.value.issues == [
        "row 2 is not path,hash,size: ['vllm/b.py', 'sha256=x']",
        "row 3: hash 'md5x=abc' is not name=digest with a hashlib algorithm",
        "row 4: size 'three' is not a number of bytes",
        "row 5: path '' is not a file's path",
        "row 5: size '-1' is not a number of bytes",
    ]
    message = str(raised.value)
    assert message.startswith("x.whl: RECORD row 2 is not path,hash,size")
    assert "more" not in message and "\n" not in message


def test_a_record_of_many_bad_rows_names_the_first_few_and_counts_the_rest():
    data = b"".join(b"vllm/%d.py,sha256=x\n" % i for i in range(12))
    with pytest.raises(InvalidRecord) as raised:
        records.read_record(data, "RECORD")
    assert len(raised.value.issues) == 12
    assert str(raised.value).endswith(f"; and {12 - records.SHOWN_ISSUES} more")


@pytest.mark.parametrize(
    ("data", "issue"),
    [(b"vllm/\xff.py,,\n", "is not UTF-8 text"), (b"vllm/\x00,,\n", "holds binary data")],
)
def test_a_record_that_is_not_text_is_one_line(data, issue):
    with pytest.raises(InvalidRecord, match=f"^RECORD: RECORD {issue}"):
        records.read_record(data, "RECORD")


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
    assert RecordRow.of("vllm/a.py", b"abc").problem(tmp_path) == problem

"""nmt_lib.data.download, on tiny archives the tests write and file:// URLs: never the network."""

import hashlib
import io
import tarfile

import pytest

from nmt_lib.data import corpus
from nmt_lib.data.corpus import Archive, Corpus, DataError
from nmt_lib.data.download import ChecksumError, download, main

MEMBERS = {"pack/tiny.en": "Hello.\nBye.\n", "pack/tiny.fr": "Bonjour.\nAu revoir.\n"}


def write_tgz(path, members=MEMBERS):
    with tarfile.open(path, "w:gz") as tar:
        for name, content in members.items():
            data = content.encode()
            info = tarfile.TarInfo(f"./{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def tiny(archive, sha256=None, md5=None, name="tiny"):
    members = (("pack/tiny.en", f"train/{name}.en"), ("pack/tiny.fr", f"train/{name}.fr"))
    return Corpus(
        name, "train", (f"train/{name}",), Archive(archive.as_uri(), members, sha256, md5)
    )


def no_network(url):
    raise AssertionError(f"unexpected download of {url}")


def test_downloads_checks_and_extracts_into_the_layout(tmp_path):
    tgz = write_tgz(tmp_path / "tiny.tgz")
    digest = hashlib.sha256(tgz.read_bytes()).hexdigest()
    reg = {"tiny": tiny(tgz, sha256=digest, md5=hashlib.md5(tgz.read_bytes()).hexdigest())}
    d = tmp_path / "data"
    files = download(["tiny"], d, registry=reg, progress=False)
    assert files == [d / "train/tiny.en", d / "train/tiny.fr"]
    assert (d / "train/tiny.fr").read_text() == MEMBERS["pack/tiny.fr"]
    assert (d / "downloads/tiny.tgz").read_bytes() == tgz.read_bytes()
    # present files are not fetched again
    assert download(["tiny"], d, registry=reg, opener=no_network) == files


def test_checksum_mismatch_keeps_nothing(tmp_path):
    tgz = write_tgz(tmp_path / "tiny.tgz")
    d = tmp_path / "data"
    for reg in ({"tiny": tiny(tgz, sha256="0" * 64)}, {"tiny": tiny(tgz, md5="0" * 32)}):
        with pytest.raises(ChecksumError, match=r"tiny\.tgz: (sha256|md5) mismatch .*expected 0+"):
            download(["tiny"], d, registry=reg, progress=False)
        assert not (d / "train").exists()
        assert not list((d / "downloads").iterdir())  # no archive, no temporary file


def test_unpublished_checksum_is_recorded_then_enforced(tmp_path):
    tgz = write_tgz(tmp_path / "tiny.tgz")
    reg = {"tiny": tiny(tgz)}
    d = tmp_path / "data"
    download(["tiny"], d, registry=reg, progress=False)
    sums = (d / "downloads/SHA256SUMS").read_text()
    assert sums == f"{hashlib.sha256(tgz.read_bytes()).hexdigest()}  tiny.tgz\n"
    (d / "train/tiny.en").unlink()
    download(["tiny"], d, registry=reg, opener=no_network)  # re-extracted from the kept archive
    assert (d / "train/tiny.en").read_text() == MEMBERS["pack/tiny.en"]
    (d / "train/tiny.en").unlink()
    write_tgz(d / "downloads/tiny.tgz", {**MEMBERS, "pack/tiny.en": "changed\n"})
    with pytest.raises(ChecksumError, match="sha256 mismatch"):
        download(["tiny"], d, registry=reg, opener=no_network)


def test_archive_without_a_member_says_what_it_holds(tmp_path):
    tgz = write_tgz(tmp_path / "tiny.tgz", {"pack/tiny.en": "x\n", "other/file": "y\n"})
    with pytest.raises(DataError, match=r"lacks \['pack/tiny\.fr'\].*other/file"):
        download(["tiny"], tmp_path / "data", registry={"tiny": tiny(tgz)}, progress=False)
    assert not (tmp_path / "data/train/tiny.fr").exists()


def test_unknown_and_offline_names(tmp_path):
    with pytest.raises(DataError, match=r"unknown corpus 'nope'; known: .*newstest2014"):
        download(["nope"], tmp_path, opener=no_network)
    with pytest.raises(DataError, match="cannot be downloaded: giga-fren.head30000 is an excerpt"):
        download(["giga-fren.head30000"], tmp_path, opener=no_network)


def test_command_line(tmp_path, monkeypatch, capsys):
    tgz = write_tgz(tmp_path / "tiny.tgz")
    monkeypatch.setitem(corpus.CORPORA, "tiny", tiny(tgz))
    assert main(["--list"]) == 0
    assert "test-full.tgz" in capsys.readouterr().out
    assert main(["--data-dir", str(tmp_path / "d"), "tiny"]) == 0
    assert (tmp_path / "d/train/tiny.en").is_file()
    assert main(["--data-dir", str(tmp_path / "d"), "nope"]) == 1
    assert "unknown corpus 'nope'" in capsys.readouterr().err

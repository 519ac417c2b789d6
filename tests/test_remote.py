"""Remote dumps: s3:// end to end against a local S3 server (moto, on 127.0.0.1), streamed; the
errors for an unsupported scheme, a missing extra and a missing object."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import rcdiag
from rcdiag.cli import app
from rcdiag.errors import InputError, UsageError
from rcdiag.io import remote
from rcdiag.io.reader import DumpReader
from rcdiag.io.remote import RemotePath

DRIFT = Path(__file__).resolve().parent.parent / "sample_data" / "drift"
runner = CliRunner()


def cli(*args: object) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def s3_server() -> Iterator[str]:
    """A moto S3 server on 127.0.0.1 (a free port) holding ``bucket/run/``: the drift sample's
    ``step=N/`` shards. Yields its endpoint URL."""
    pytest.importorskip("s3fs")
    server_module = pytest.importorskip("moto.server")
    boto3 = pytest.importorskip("boto3")
    werkzeug = logging.getLogger("werkzeug")
    level = werkzeug.level
    werkzeug.setLevel(logging.ERROR)  # no request log on stderr (the CLI's stderr is asserted)
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        )
        client.create_bucket(Bucket="bucket")
        for path in sorted(DRIFT.rglob("*.parquet")):
            client.upload_file(str(path), "bucket", f"run/{path.relative_to(DRIFT)}")
        client.put_object(Bucket="bucket", Key="run/_SUCCESS", Body=b"")
        yield endpoint
    finally:
        server.stop()
        werkzeug.setLevel(level)


@pytest.fixture
def aws(s3_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Credentials and the endpoint of the local server in the environment (for this test only);
    no AWS configuration of the machine is read."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server)
    return s3_server


def without_paths(document: dict[str, Any]) -> dict[str, Any]:
    return {**document, "source": {**document["source"], "paths": None}}


def test_analyze_s3_equals_the_local_copy(aws: str, tmp_path: Path) -> None:
    remote_json, local_json = tmp_path / "remote.json", tmp_path / "local.json"
    code, _, err = cli("analyze", "s3://bucket/run/", "--json", remote_json, "-q")
    assert code == 0, err
    assert cli("analyze", DRIFT, "--json", local_json, "-q")[0] == 0
    remote_doc, local_doc = json.loads(remote_json.read_text()), json.loads(local_json.read_text())
    assert without_paths(remote_doc) == without_paths(local_doc)
    assert remote_doc["source"]["paths"] == [
        f"s3://bucket/run/{Path(p).relative_to(DRIFT)}" for p in local_doc["source"]["paths"]
    ]


def test_storage_options_globs_files_and_the_api(
    aws: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    out = tmp_path / "steps.csv"
    code, _, err = cli(
        "compare-presets", "s3://bucket/run/step=1*/*.parquet", "-p", "decoupled_token_is",
        "--storage-option", f"endpoint_url={aws}", "--csv", out, "-q",
    )  # fmt: skip
    assert code == 0, err
    assert out.read_text().splitlines()[1].startswith('1,"decoupled_token_is",')
    result = rcdiag.analyze(
        ["s3://bucket/run/step=3/part-0.parquet", "s3://bucket/run/step=4/"],
        storage_options={"endpoint_url": aws},
    )
    local = rcdiag.analyze([DRIFT / "step=3", DRIFT / "step=4"])
    assert without_paths(result.to_json()) == without_paths(local.to_json())
    assert result.steps.equals(local.steps)


def test_a_remote_file_is_streamed_not_downloaded(
    aws: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3

    rows, length = 200, 1000
    rng = np.random.default_rng(0)
    rollout = rng.normal(-1, 0.2, (rows, length))
    table = pa.table(
        {
            "rollout_log_probs": list(rollout),
            "old_log_probs": list(rollout + rng.normal(0, 0.01, rollout.shape)),
            "step": np.zeros(rows, dtype=np.int64),
        }
    )
    local = tmp_path / "big.parquet"
    pq.write_table(table, local, row_group_size=16, compression="none")
    boto3.client("s3", endpoint_url=aws).upload_file(str(local), "bucket", "big.parquet")
    opened: list[Any] = []
    real_open = RemotePath.open

    def spy(self: RemotePath) -> Any:
        handle = real_open(self)
        opened.append(handle)
        return handle

    monkeypatch.setattr(RemotePath, "open", spy)
    monkeypatch.setattr(remote, "BLOCK_SIZE", 64 << 10)
    reader = DumpReader(["s3://bucket/big.parquet"], batch_tokens=16 * length)
    batches = reader.batches()
    first = next(batches)
    size = local.stat().st_size
    assert first.rows == 16
    footer, scan = opened  # the footer is read at start, the file opened again for its scan
    assert footer.closed and not scan.closed  # no handle held while other files are read
    assert scan.cache.total_requested_bytes < size / 5  # what the first batch needs, not all
    assert sum(b.rows for b in batches) == rows - 16


@pytest.mark.parametrize(
    ("url", "module", "extra"),
    [
        ("s3://bucket/run/", "s3fs", "s3"),
        ("gs://bucket/run/", "gcsfs", "gcs"),
        ("hf://datasets/org/run/", "huggingface_hub", "hf"),
        ("https://example.org/run.parquet", "aiohttp", "http"),
    ],
)
def test_a_missing_extra_is_named(
    url: str, module: str, extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # as if the extra were not installed
    code, _, err = cli("analyze", url)
    assert code == 2
    assert err.strip() == (
        f"Error: {url}: reading {url.split(':')[0]}:// URLs needs rcdiag's '{extra}' extra: "
        f"pip install 'rcdiag[{extra}]'"
    )


def test_unsupported_schemes_and_file_urls(tmp_path: Path) -> None:
    code, _, err = cli("analyze", "ftp://host/run/")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "unsupported URL scheme 'ftp://'" in err and "s3://" in err
    with pytest.raises(UsageError, match="unsupported URL scheme"):
        rcdiag.analyze("abfs://container/run")
    as_url = rcdiag.analyze(f"file://{DRIFT}/step=2")
    assert as_url.to_json() == rcdiag.analyze(f"{DRIFT}/step=2").to_json()
    with pytest.raises(UsageError, match="names a local file"):
        rcdiag.analyze("file://otherhost/run")


def test_missing_objects_and_bad_credentials_are_one_line(
    aws: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = cli("analyze", "s3://bucket/nothing-here/")
    assert code == 2
    assert err.strip() == "Error: s3://bucket/nothing-here/: no such file or directory"
    code, _, err = cli("analyze", "s3://bucket/run/step=9*/*.pq")
    assert code == 2 and "no file matches this pattern" in err
    with pytest.raises(InputError, match=r"^s3://no-such-bucket/x: "):
        rcdiag.analyze("s3://no-such-bucket/x")
    code, _, err = cli("analyze", "s3://bucket/run/", "--storage-option", "nonsense")
    assert code == 2 and "--storage-option 'nonsense': expected KEY=VALUE" in err

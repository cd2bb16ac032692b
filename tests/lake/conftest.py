"""What the lake tests share: a small table whose job follows age, and a releases root
on local disk and on the S3-compatible test server."""

from __future__ import annotations

import pytest
from release_helpers import job_table, write_table
from s3_helpers import new_bucket


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    return write_table(job_table(4, 3000), tmp_path_factory.mktemp("jobs") / "t")


@pytest.fixture(params=["local", "s3"])
def root(request, tmp_path):
    if request.param == "s3":
        request.getfixturevalue("s3")
        return new_bucket() + "/lake"
    return str(tmp_path / "lake")

"""Writes the Python modules of Kubernetes's own .proto definitions into this package: run by `make protos`,
never at run time.

Why committed, not generated at set-up: a fresh clone then needs neither Go's module cache nor protoc, and the
fifteen modules are small (about 200 KB). `make protos` runs this in a throw-away venv holding GRPCIO_TOOLS, whose
bundled protoc (PROTOC_VERSION) writes code that checks, on import, for a protobuf runtime of the same major
version and at least its own minor: pyproject.toml's `protobuf` range says the same, and a unit test reads the
version each module records. The sources are the pinned Kubernetes release's modules (MODULES_VERSION), and the
client_model its component-base requires (VERSIONS), from the Go module cache; each module's header names its
source file and that file's sha256.

protoc names a Python module after the .proto's path (`k8s.io/api/core/v1/generated.proto` becomes the package
path `k8s.io.api.core.v1`); this package keeps them flat instead, so the imports between them are rewritten to
`loadtests.kube.pb.<name>_pb2`. The descriptors themselves, and so the messages' full names, are unchanged.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

MODULES_VERSION = "v0.37.2"  # k8s.io/api and k8s.io/apimachinery of Kubernetes v1.37.2
# other modules' versions: the one Kubernetes v1.37.2's component-base requires
VERSIONS = {"github.com/prometheus/client_model": "v0.6.2"}
# a source's file when it is not generated.proto
FILES = {"prometheus_metrics": "metrics.proto"}
GRPCIO_TOOLS = "grpcio-tools==1.85.1"
PROTOC_VERSION = "35.1"  # what GRPCIO_TOOLS bundles (`python -m grpc_tools.protoc --version`)
PACKAGE = "loadtests.kube.pb"
# module name in this package -> (Go module, the .proto's folder in it): apimachinery's five, which core/v1
# imports, then the API groups a node's agents watch or write (loadtests/data/node_agents_reference.yaml), each
# importing only modules of this table (meta/v1, runtime, schema; core/v1 all but coordination and
# authentication; resource node and storage; intstr networking). PodCertificateRequest is certificates.k8s.io/v1:
# GA in v1.37 (feature gate on by default, and v1 a stable version served by default), which a kubelet watches.
SOURCES = {
    "meta_v1": ("k8s.io/apimachinery", "pkg/apis/meta/v1"),
    "runtime": ("k8s.io/apimachinery", "pkg/runtime"),
    "schema": ("k8s.io/apimachinery", "pkg/runtime/schema"),
    "intstr": ("k8s.io/apimachinery", "pkg/util/intstr"),
    "resource": ("k8s.io/apimachinery", "pkg/api/resource"),
    "core_v1": ("k8s.io/api", "core/v1"),
    "discovery_v1": ("k8s.io/api", "discovery/v1"),
    "node_v1": ("k8s.io/api", "node/v1"),
    "storage_v1": ("k8s.io/api", "storage/v1"),
    "networking_v1": ("k8s.io/api", "networking/v1"),
    "coordination_v1": ("k8s.io/api", "coordination/v1"),
    "certificates_v1": ("k8s.io/api", "certificates/v1"),
    "events_v1": ("k8s.io/api", "events/v1"),
    "authentication_v1": ("k8s.io/api", "authentication/v1"),
    # what every component's /metrics answers in its protobuf form (io.prometheus.client.MetricFamily)
    "prometheus_metrics": ("github.com/prometheus/client_model", "io/prometheus/client"),
}


def version(module: str) -> str:
    return VERSIONS.get(module, MODULES_VERSION)


def proto_path(name: str) -> str:
    """The path a .proto is imported by (and registered under in protobuf's descriptor pool)."""
    module, folder = SOURCES[name]
    return f"{module}/{folder}/{FILES.get(name, 'generated.proto')}"


def generated_module(name: str) -> str:
    """The module protoc names for a source: its path with dots for slashes."""
    return proto_path(name).removesuffix(".proto").replace("/", ".") + "_pb2"


def module_cache() -> Path:
    """Go's module cache, as `go env GOMODCACHE` says (go reads GOMODCACHE and GOPATH itself); ~/go/pkg/mod
    without go."""
    found = ""
    if shutil.which("go"):
        found = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True).stdout.strip()
    return Path(found) if found else Path.home() / "go" / "pkg" / "mod"


def source_file(cache: Path, name: str) -> Path:
    module, folder = SOURCES[name]
    return cache / f"{module}@{version(module)}" / folder / FILES.get(name, "generated.proto")


def rewrite(code: str, name: str, digest: str) -> str:
    """protoc's output for one source as a module of this package: imports of the other sources, and the
    module name the messages are built under, point into this package; a header names the source."""
    for other in SOURCES:
        package, _, module = generated_module(other).rpartition(".")
        code = code.replace(f"from {package} import {module} as", f"from {PACKAGE} import {other}_pb2 as")
    code = code.replace(f"'{generated_module(name)}'", f"'{PACKAGE}.{name}_pb2'")
    module, folder = SOURCES[name]
    header = (f"# Written by loadtests/kube/pb/generate.py (`make protos`) with protoc {PROTOC_VERSION} "
              f"({GRPCIO_TOOLS}) from\n# {module}@{version(module)}/{folder}/{FILES.get(name, 'generated.proto')}, "
              f"sha256 {digest}\n")
    return header + code


def generate(cache: Path, into: Path) -> list[Path]:
    """Every source, compiled together and rewritten into `into`; the paths written."""
    from grpc_tools import protoc  # only in `make protos`'s throw-away venv

    missing = [str(source_file(cache, n)) for n in SOURCES if not source_file(cache, n).is_file()]
    if missing:
        wanted = sorted({f"{module}@{version(module)}" for module, _ in SOURCES.values()})
        raise SystemExit(f"not in Go's module cache: {', '.join(missing)} (run: go mod download {' '.join(wanted)})")
    written = []
    with tempfile.TemporaryDirectory() as tmp:
        include, out = Path(tmp, "include"), Path(tmp, "out")
        for name in SOURCES:
            (include / proto_path(name)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source_file(cache, name), include / proto_path(name))
        out.mkdir()
        # protoc's own well-known types (google/protobuf/timestamp.proto, which metrics.proto imports)
        bundled = Path(protoc.__file__).parent / "_proto"
        args = ["protoc", f"-I{include}", f"-I{bundled}", f"--python_out={out}", *(proto_path(n) for n in SOURCES)]
        if protoc.main(args) != 0:
            raise SystemExit("protoc failed (its message is above)")
        for name in SOURCES:
            code = (out / generated_module(name).replace(".", "/")).with_suffix(".py").read_text()
            digest = hashlib.sha256(source_file(cache, name).read_bytes()).hexdigest()
            target = into / f"{name}_pb2.py"
            target.write_text(rewrite(code, name, digest))
            written.append(target)
    return written


def gencode_version(code: str) -> tuple[int, int, int]:
    """The protobuf version a generated module was written for (its ValidateProtobufRuntimeVersion call)."""
    found = re.search(r"Domain\.PUBLIC,\s*(\d+),\s*(\d+),\s*(\d+),", code)
    if found is None:
        raise ValueError("no ValidateProtobufRuntimeVersion call")
    major, minor, patch = (int(x) for x in found.groups())
    return major, minor, patch


if __name__ == "__main__":
    for path in generate(module_cache(), Path(__file__).resolve().parent):
        print(f"wrote {path}", file=sys.stderr)

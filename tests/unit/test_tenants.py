"""Tenants (target.tenants): the plan refuses what would not be an ordinary user's load, the control plane's objects
and certificates say who each tenant is and what it may do, the load sends each scenario as its tenant, and the
lesson reads that measure tenants (an audit p99, a flow-control counter of a level that exists) read what they
say."""

from __future__ import annotations

import gzip
import stat
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from loadtests.analysis.query import read
from loadtests.analysis.scrapes import scrape_path
from loadtests.config import lesson as lesson_mod
from loadtests.config import plan as plan_mod
from loadtests.config import tenants as tenants_mod
from loadtests.controlplane import tenants
from loadtests.controlplane.pki import create_cluster_pki
from loadtests.errors import PlanError, TargetError
from loadtests.kube.access import ClusterAccess
from loadtests.kube.errors import ApiError
from loadtests.load.contract import LoadConfig
from loadtests.load.generator import LoadGenerator, LoadGeneratorError, StepLoad
from loadtests.load.remote import MasterBind
from loadtests.results import StepResult
from loadtests.results.audit import AuditRow, AuditSummary
from tests.cli import error_lines, loadtest

NOISY = {"groups": ["tenants"], "scenarios": ["list_pollers"],
         "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]}
QUIET = {"groups": ["tenants", "quiet"], "scenarios": ["pod_churn"],
         "rules": [{"resources": ["pods"], "verbs": ["create", "delete"]}]}


def _plan(tenant_map: dict[str, Any], **target: Any) -> plan_mod.Plan:
    return plan_mod.parse({"target": {"tenants": tenant_map, **target}, "steps": [{"nodes": 1}],
                           "load": {"scenarios": {"pod_churn": {"rate": 1}, "list_pollers": {"rate": 1}}}}, "p.yaml")


def test_tenants_are_read_with_their_defaults_and_written_back_as_read() -> None:
    found = _plan({"tenant-noisy": {**NOISY, "flow_schema": {"shares": 2}}, "tenant-quiet": QUIET})
    noisy, quiet = found.target.tenants["tenant-noisy"], found.target.tenants["tenant-quiet"]
    assert noisy.flow_schema == tenants_mod.FlowSchemaSpec(shares=2)
    assert quiet.flow_schema is None and quiet.groups == ["tenants", "quiet"]
    assert quiet.rules[0]["apiGroups"] == [""]  # the core group unless a rule names one
    written = found.to_dict()["target"]["tenants"]
    assert tenants_mod.parse("again", written) == found.target.tenants  # results.json's plan reads back the same
    assert "tenants" not in plan_mod.parse({"steps": [{"nodes": 1}]}).to_dict()["target"]  # none: as before tenants


@pytest.mark.parametrize(("tenant_map", "target", "message"), [
    ({"tenant-noisy": {**NOISY, "groups": ["system:masters"]}}, {},
     r"p.yaml: target.tenants.tenant-noisy.groups\[0\]: system:masters is a group of Kubernetes' own"),
    ({"Tenant_Noisy": NOISY}, {}, r"target.tenants.Tenant_Noisy: a tenant's user name must be lowercase"),
    ({"tenant-noisy": {**NOISY, "scenarios": ["list_poller"]}}, {},
     r"target.tenants.tenant-noisy.scenarios\[0\]: unknown scenario 'list_poller'"),
    ({"a": NOISY, "b": NOISY}, {}, r"target.tenants.b.scenarios\[0\]: list_pollers already sends as a"),
    ({"tenant-noisy": {**NOISY, "scenarios": []}}, {}, r"scenarios: must be a non-empty list"),
    ({"tenant-noisy": {**NOISY, "rules": [{"resources": ["pods"]}]}}, {}, r"rules\[0\].verbs: is required"),
    ({"tenant-noisy": {**NOISY, "rules": [{"verbs": ["get"]}]}}, {}, r"rules\[0\]: needs resources or nonResourceURLs"),
    ({"tenant-noisy": {**NOISY, "rules": [{"verbs": ["get"], "resources": ["pods"], "users": ["x"]}]}}, {},
     r"rules\[0\].users: unknown field"),
    ({"tenant-noisy": {**NOISY, "role": "admin"}}, {}, r"target.tenants.tenant-noisy.role: unknown field"),
    ({"tenant-noisy": {**NOISY, "flow_schema": {"shares": 0}}}, {},
     r"flow_schema.shares: must be a whole number from 1 to 10000 \(got 0\)"),
    ({"tenant-noisy": {**NOISY, "flow_schema": {"precedence": 9900}}}, {},
     r"flow_schema.precedence: must be a whole number from 2 to 9899"),
    ({"tenant-noisy": {**NOISY, "flow_schema": {"queues": 2, "hand_size": 3}}}, {}, r"flow_schema.hand_size"),
    ({"tenant-noisy": {**NOISY, "flow_schema": {}}},
     {"component_args": {"kube-apiserver": ["--enable-priority-and-fairness=false"]}},
     r"flow_schema: needs API Priority and Fairness, which target.component_args turn off"),
    ({"tenant-noisy": NOISY}, {"kind": "cluster", "kubeconfig": "k"},
     r"target.tenants: only a local control plane's components can be configured"),
])
def test_a_tenant_that_is_not_an_ordinary_users_load_is_refused_in_one_line(
        tenant_map: dict[str, Any], target: dict[str, Any], message: str) -> None:
    with pytest.raises(PlanError, match=message):
        _plan(tenant_map, **target)


def test_flow_control_off_is_read_as_go_reads_its_flags() -> None:
    assert tenants_mod.flow_control_off(["--enable-priority-and-fairness=false"])
    assert not tenants_mod.flow_control_off(["--enable-priority-and-fairness=false", "--enable-priority-and-fairness"])
    assert not tenants_mod.flow_control_off(["--max-requests-inflight=10"])


def test_each_tenant_gets_a_role_of_its_rules_and_its_own_flow_schema_and_level() -> None:
    rejecting = {"shares": 1, "queues": 0, "borrowing_limit_percent": None}
    found = _plan({"tenant-noisy": {**NOISY, "flow_schema": rejecting}, "tenant-quiet": QUIET}).target.tenants
    made = tenants.manifests(found)
    assert [(m["kind"], m["metadata"]["name"]) for m in made] == [
        ("ClusterRole", "k8s-loadtest:tenant:tenant-noisy"), ("ClusterRoleBinding", "k8s-loadtest:tenant:tenant-noisy"),
        ("PriorityLevelConfiguration", "tenant-noisy"), ("FlowSchema", "tenant-noisy"),
        ("ClusterRole", "k8s-loadtest:tenant:tenant-quiet"), ("ClusterRoleBinding", "k8s-loadtest:tenant:tenant-quiet")]
    assert all(m["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "k8s-loadtest"} for m in made)
    role, binding, level, schema = made[:4]
    assert role["rules"] == NOISY["rules"]
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "tenant-noisy"}]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    # queues 0: what finds no seat is refused at once; no borrowing limit given: none set
    assert level["spec"] == {"type": "Limited", "limited": {"nominalConcurrencyShares": 1, "lendablePercent": 0,
                                                            "limitResponse": {"type": "Reject"}}}
    spec = schema["spec"]
    assert spec["priorityLevelConfiguration"] == {"name": "tenant-noisy"} and spec["matchingPrecedence"] == 1000
    assert spec["distinguisherMethod"] == {"type": "ByUser"}
    assert spec["rules"][0]["subjects"] == [{"kind": "User", "user": {"name": "tenant-noisy"}}]
    queued = tenants.flow_manifests("t", tenants_mod.FlowSchemaSpec(queues=4, hand_size=2, queue_length=7))[0]
    assert queued["spec"]["limited"]["limitResponse"] == {
        "type": "Queue", "queuing": {"queues": 4, "handSize": 2, "queueLengthLimit": 7}}
    assert queued["spec"]["limited"]["borrowingLimitPercent"] == 0


def test_a_tenants_certificate_names_the_user_and_its_groups_and_only_its_owner_reads_it(tmp_path: Path) -> None:
    pki = create_cluster_pki(tmp_path / "pki")
    found = _plan({"tenant-quiet": QUIET}).target.tenants
    pairs = tenants.issue_certificates(tmp_path / "pki", found)
    cert = x509.load_pem_x509_certificate(pairs["tenant-quiet"].cert.read_bytes())
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "tenant-quiet"
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == ["tenants", "quiet"]
    ca = x509.load_pem_x509_certificate(pki.ca.cert.read_bytes())
    public_key = ca.public_key()
    assert isinstance(public_key, ec.EllipticCurvePublicKey)
    cert.verify_directly_issued_by(ca)  # signed by the cluster's own CA: the apiserver accepts it
    for path in (pairs["tenant-quiet"].cert, pairs["tenant-quiet"].key):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    access = tenants.scenario_access(tmp_path, "https://127.0.0.1:6443", found)
    assert list(access) == ["pod_churn"]
    assert access["pod_churn"].cert_file == str(pairs["tenant-quiet"].cert)
    assert access["pod_churn"].key_file == str(pairs["tenant-quiet"].key)
    assert access["pod_churn"].kubeconfig == str(tmp_path / "tenant-tenant-quiet.kubeconfig")


class FakeApi:
    """Records what is created; a FlowSchema's status says the apiserver took it up after `polls` reads."""

    def __init__(self, polls: int = 1, refuse: str = "") -> None:
        self.created: list[str] = []
        self.polls = polls
        self.refuse = refuse

    def create(self, path: str, body: dict[str, Any], *, exist_ok: bool = False) -> dict[str, Any]:
        if body["kind"] == self.refuse:
            raise ApiError(422, "spec.limited.nominalConcurrencyShares: Invalid value", "POST", path)
        self.created.append(f"{path.rsplit('/', 1)[1]}/{body['metadata']['name']}")
        return body

    def get(self, path: str) -> dict[str, Any]:
        self.polls -= 1
        return {"status": {"conditions": [{"type": "Dangling", "status": "False"}]}} if self.polls <= 0 else {}


def test_objects_are_made_and_a_flow_schema_counts_only_once_taken_up(monkeypatch: pytest.MonkeyPatch) -> None:
    found = _plan({"tenant-noisy": {**NOISY, "flow_schema": {}}}).target.tenants
    api = FakeApi(polls=3)
    tenants.make_objects(api, found, log=lambda _: None)
    assert api.created == ["clusterroles/k8s-loadtest:tenant:tenant-noisy",
                           "clusterrolebindings/k8s-loadtest:tenant:tenant-noisy",
                           "prioritylevelconfigurations/tenant-noisy", "flowschemas/tenant-noisy"]
    assert api.polls == 0  # read until its status said so
    monkeypatch.setattr(tenants, "TAKEN_UP_S", 0.3)
    with pytest.raises(TargetError, match=r"did not take up FlowSchema tenant-noisy within 0.3 s .*Priority and "
                                          r"Fairness off\?$"):
        tenants.make_objects(FakeApi(polls=10**6), found, log=lambda _: None)
    with pytest.raises(TargetError, match=r"^tenants: the apiserver refused PriorityLevelConfiguration tenant-noisy: "
                                          r".*; fix target.tenants in the plan$"):
        tenants.make_objects(FakeApi(refuse="PriorityLevelConfiguration"), found, log=lambda _: None)
    assert not tenants.taken_up({"status": {"conditions": [{"type": "Dangling", "status": "True"}]}})


def _access(name: str) -> ClusterAccess:
    return ClusterAccess(server="https://127.0.0.1:6443", kubeconfig=f"/k/{name}", cert_file=f"/p/{name}.crt",
                         key_file=f"/p/{name}.key")


def test_the_load_sends_each_scenario_as_its_tenant_and_no_tenant_credential_leaves_the_machine(
        tmp_path: Path) -> None:
    config = LoadConfig(access=_access("load"), scenarios={}, nodes=1,
                        scenario_access={"list_pollers": _access("noisy")})
    assert config.access_for("list_pollers").cert_file == "/p/noisy.crt"
    assert config.access_for("pod_churn").cert_file == "/p/load.crt"  # not a tenant's: the load's own
    assert LoadConfig.from_dict(config.to_dict()) == config  # as the Locust processes read it
    sent = config.without_access()
    assert "access" not in sent and "scenario_access" not in sent
    assert LoadConfig.from_dict({**sent, "access": config.to_dict()["access"]}).scenario_access == {}
    step = StepLoad({"list_pollers": {"rate": 1}}, nodes=1, duration_s=1, out_dir=tmp_path,
                    master=MasterBind("127.0.0.1", 5557, workers=1))
    with pytest.raises(LoadGeneratorError, match="tenants .* send from this machine only"):
        LoadGenerator(step, _access("load"), scenario_access={"list_pollers": _access("noisy")})


def _keep_pages(folder: Path, start: str, end: str) -> None:
    for which, text in (("start", start), ("end", end)):
        path = scrape_path(folder, "apiserver", which)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(gzip.compress(text.encode()))


SEATS = 'apiserver_flowcontrol_nominal_limit_seats{priority_level="global-default"} 5\n'
REJECTED = ('apiserver_flowcontrol_rejected_requests_total{{flow_schema="global-default",'
            'priority_level="global-default",reason="queue-full"}} {n}\n')


def _step(**changes: Any) -> StepResult:
    step = StepResult(index=0, name="10 nodes", nodes=10, pods_per_node=1, started_at="t", duration_s=20.0)
    for key, value in changes.items():
        setattr(step, key, value)
    return step


def _rejected(level: str, stat_: str = "rate") -> lesson_mod.Measure:
    return lesson_mod.Measure("r", "per_s", "s", {"scrape": {
        "metric": "apiserver_flowcontrol_rejected_requests_total", "stat": stat_, "labels": {"priority_level": level},
        "present": "apiserver_flowcontrol_nominal_limit_seats"}})


def test_a_flow_control_counter_is_measured_only_where_its_level_exists(tmp_path: Path) -> None:
    step = _step()
    on, off, rejecting = tmp_path / "on", tmp_path / "off", tmp_path / "rejecting"
    _keep_pages(on, SEATS, SEATS)  # APF on, nothing rejected yet: the counter has no series at all
    _keep_pages(off, "go_goroutines 1\n", "go_goroutines 1\n")  # APF off: no level exists
    _keep_pages(rejecting, SEATS + REJECTED.format(n=10), SEATS + REJECTED.format(n=50))
    assert read(_rejected("global-default"), step, on) == 0.0
    assert read(_rejected("global-default"), step, off) is None
    assert read(_rejected("tenant-noisy"), step, on) is None  # a level of this name does not exist here
    assert read(_rejected("global-default"), step, rejecting) == 2.0  # 40 over the 20 s window
    assert read(_rejected("global-default", "delta"), step, rejecting) == 40.0
    assert read(_rejected("tenant-noisy"), step, rejecting) is None


def test_an_audit_p99_is_the_tenants_own_requests(tmp_path: Path) -> None:
    step = _step(audit=AuditSummary(source="audit.log", requests=[
        AuditRow("k8s-loadtest/pod_churn", "POST", "pods", "resource", "", 100, 20.0, 0.8, {"201": 98, "429": 2}),
        AuditRow("k8s-loadtest/pod_churn", "DELETE", "pods", "resource", "", 90, 9.0, 0.3, {"200": 90}),
        AuditRow("k8s-loadtest/list_pollers", "LIST", "pods", "cluster", "", 500, 900.0, 4.0, {"200": 400, "429": 100}),
    ]))
    quiet = lesson_mod.Measure("q", "s", "s", {"audit": {"verb": "POST", "resource": "pods",
                                                         "client": "k8s-loadtest/pod_churn", "stat": "p99"}})
    assert read(quiet, step, tmp_path) == 0.8
    nobody = lesson_mod.Measure("q", "s", "s", {"audit": {"verb": "POST", "resource": "pods", "client": "nobody",
                                                          "stat": "p99"}})
    assert read(nobody, step, tmp_path) is None  # no such request: not measured, never 0
    refused = lesson_mod.Measure("r", "per_s", "s", {"audit": {"client": "k8s-loadtest/list_pollers", "code": "429",
                                                               "stat": "rate"}})
    assert read(refused, step, tmp_path) == 5.0
    assert read(quiet, _step(), tmp_path) is None  # no audit log: not measured


def test_the_lesson_compares_the_same_load_with_flow_control_off_on_and_its_own_schema() -> None:
    found = lesson_mod.load("apf-noisy-neighbour")
    assert found.deciding.read == {"audit": {"verb": "POST", "resource": "pods", "client": "k8s-loadtest/pod_churn",
                                             "stat": "p99"}}
    off, default, own = (found.plan(v, "small") for v in found.variants)
    assert [v.role for v in found.variants] == ["warned", "fix", "fix"]
    assert off.load == default.load == own.load and off.steps == default.steps == own.steps
    assert tenants_mod.flow_control_off(off.target.component_args["kube-apiserver"])
    limits = [a for a in off.target.component_args["kube-apiserver"] if a.startswith("--max-")]
    assert limits == default.target.component_args["kube-apiserver"] == own.target.component_args["kube-apiserver"]
    assert default.target.tenants["tenant-noisy"].flow_schema is None
    assert own.target.tenants["tenant-noisy"].flow_schema is not None
    assert own.target.tenants["tenant-quiet"] == default.target.tenants["tenant-quiet"]
    for plan in (off, default, own):
        assert plan.target.identities == "production"  # the kubelets are kubelets to flow control
        assert sorted(s for t in plan.target.tenants.values() for s in t.scenarios) == sorted(plan.load)


def test_tenants_are_refused_on_an_existing_cluster_named_on_the_command_line(tmp_path: Path) -> None:
    plan = tmp_path / "tenants.yaml"
    plan.write_text("target: {tenants: {tenant-x: {scenarios: [pod_churn], rules: [{resources: [pods], verbs: "
                    "[create]}]}}}\nsteps: [{nodes: 1}]\nload: {scenarios: {pod_churn: {rate: 1}}}\n")
    refused = loadtest("run", "--plan", str(plan), "--kubeconfig", str(tmp_path / "kubeconfig"), "--context", "c",
                       "--allow-context", "c", "--out", str(tmp_path / "out"), timeout=60)
    assert refused.returncode == 2
    assert error_lines(refused) == [f"loadtest: {plan}: target.tenants: tenants are made by a local control plane "
                                    "only; drop --kubeconfig to run this plan locally, or the tenants"]


def test_set_up_writes_each_tenant_a_private_kubeconfig_of_its_own_certificate(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import yaml

    pki = create_cluster_pki(tmp_path / "pki")
    admin = ClusterAccess(server="https://127.0.0.1:6443", kubeconfig="", ca_file=str(pki.ca.cert),
                          cert_file=str(pki.admin.cert), key_file=str(pki.admin.key))
    made: list[list[str]] = []
    monkeypatch.setattr(tenants, "make_objects", lambda client, found, log: made.append(list(found)))
    tenants.set_up(admin, tmp_path, _plan({"tenant-quiet": QUIET}).target.tenants, log=lambda _: None)
    assert made == [["tenant-quiet"]]
    path = tenants.kubeconfig_path(tmp_path, "tenant-quiet")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    user = yaml.safe_load(path.read_text())["users"][0]
    assert user["name"] == "tenant-quiet"
    assert user["user"] == {"client-certificate": str(tmp_path / "pki" / "tenant-tenant-quiet.crt"),
                            "client-key": str(tmp_path / "pki" / "tenant-tenant-quiet.key")}

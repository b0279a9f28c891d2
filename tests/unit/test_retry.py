"""client-go's resends (kube/retry.py), in the rule itself and in each transport's loop, fed recorded answers; and
the reflector backoff of client-go (Backoff.client_go)."""

from __future__ import annotations

import contextlib
import io
import random
from collections.abc import Iterator
from typing import Any

import pytest
import urllib3
from geventhttpclient.response import HTTPConnectionClosed

from loadtests.kube.access import ClusterAccess
from loadtests.kube.errors import ApiError
from loadtests.kube.reflector import Backoff
from loadtests.kube.rest import RestClient
from loadtests.kube.retry import CLIENT_GO, ONCE_ON_RESET, RETRIED, Retried, RetryPolicy, retry_after_s
from loadtests.load.locust.transport import KubeApi

REFUSED = {"Retry-After": "1", "X-Kubernetes-PF-FlowSchema-UID": "u"}


class TestRule:
    @pytest.mark.parametrize(("status", "headers", "wait_s"), [
        (429, {"Retry-After": "1"}, 1.0),
        (429, {"retry-after": "32"}, 32.0),  # any case
        (503, {"Retry-After": "5"}, 5.0),
        (500, {"Retry-After": "0"}, 0.0),  # at once
        (504, {"Retry-After": "+2"}, 2.0),  # as strconv.Atoi reads it
        (429, {"Retry-After": "-3"}, 0.0),  # Go's timer fires at once
        (429, {}, None),  # no Retry-After: the answer is the caller's
        (503, {"Retry-After": "1.5"}, None),  # not whole seconds
        (503, {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, None),
        (503, {"Retry-After": " 1"}, None),
        (409, {"Retry-After": "1"}, None),  # neither 429 nor 5xx
        (200, {"Retry-After": "1"}, None),
    ])
    def test_checkwait_and_retry_after_seconds(self, status: int, headers: dict[str, str],
                                               wait_s: float | None) -> None:
        assert retry_after_s(status, headers) == wait_s
        assert CLIENT_GO.after_answer(status, headers, retries=0) == wait_s

    def test_at_most_ten_resends(self) -> None:
        assert [CLIENT_GO.after_answer(429, REFUSED, n) for n in (0, 9, 10, 11)] == [1.0, 1.0, None, None]
        assert [CLIENT_GO.after_broken_connection("GET", n) for n in (0, 9, 10)] == [1.0, 1.0, None]

    def test_a_broken_connection_is_resent_for_a_get_only(self) -> None:
        assert CLIENT_GO.after_broken_connection("get", 0) == 1.0
        assert [CLIENT_GO.after_broken_connection(m, 0) for m in ("POST", "PUT", "PATCH", "DELETE")] == [None] * 4

    def test_the_availability_probes_rule_resends_a_reset_get_once_at_once_and_no_answer(self) -> None:
        assert ONCE_ON_RESET.after_answer(429, REFUSED, 0) is None
        assert [ONCE_ON_RESET.after_broken_connection("GET", n) for n in (0, 1)] == [0.0, None]
        assert RetryPolicy(broken_wait_s=None).after_broken_connection("GET", 0) is None


# --- RestClient, over recorded answers -------------------------------------------------------------------


def answer(status: int, headers: dict[str, str] | None = None, body: bytes = b"{}") -> urllib3.HTTPResponse:
    """A recorded answer, its body still to be read (as the client asks for a watch's)."""
    return urllib3.HTTPResponse(body=io.BytesIO(body), headers=headers or {"Content-Type": "application/json"},
                                status=status, preload_content=False)


class RecordedPool:
    """Stands in for the client's urllib3 pool: each request gets the next recorded answer (or error)."""

    def __init__(self, answers: list[urllib3.HTTPResponse | BaseException]) -> None:
        self.answers = answers
        self.sent: list[tuple[str, str]] = []

    def request(self, method: str, url: str, **_options: Any) -> urllib3.HTTPResponse:
        self.sent.append((method, url))
        found = self.answers.pop(0)
        if isinstance(found, BaseException):
            raise found
        return found

    def clear(self) -> None:
        pass


@pytest.fixture()
def slept() -> list[float]:
    return []


def client_with(answers: list[Any], slept: list[float], **options: Any) -> tuple[RestClient, RecordedPool]:
    client = RestClient(ClusterAccess(server="https://127.0.0.1:1", kubeconfig="/nonexistent"),
                        sleep=slept.append, **options)
    pool = RecordedPool(answers)
    client.pool = pool  # type: ignore[assignment]
    return client, pool


class TestRestClient:
    def test_a_refused_get_is_resent_after_the_servers_wait_and_the_success_is_the_callers(
            self, slept: list[float]) -> None:
        client, pool = client_with([answer(429, REFUSED), answer(503, {"Retry-After": "3"}),
                                    answer(200, body=b'{"kind": "Namespace"}')], slept)
        assert client.get("/api/v1/namespaces/default") == {"kind": "Namespace"}
        assert slept == [1.0, 3.0] and len(pool.sent) == 3
        assert client.sent() == {("GET", "namespaces"): 3}  # every attempt: the apiserver counted each
        assert client.retried() == {("GET", "namespaces"): Retried(2, 4.0)}

    def test_a_post_refused_with_retry_after_is_resent_too(self, slept: list[float]) -> None:
        client, _ = client_with([answer(429, REFUSED), answer(201, body=b'{"kind": "Pod"}')], slept)
        assert client.create("/api/v1/namespaces/a/pods", {"kind": "Pod"}) == {"kind": "Pod"}
        assert client.retried() == {("POST", "pods"): Retried(1, 1.0)}

    def test_still_refused_after_ten_resends_is_the_callers_failure(self, slept: list[float]) -> None:
        client, pool = client_with([answer(429, REFUSED) for _ in range(12)], slept)
        with pytest.raises(ApiError) as raised:
            client.get("/api/v1/nodes")
        assert raised.value.status == 429
        assert len(pool.sent) == 11 and slept == [1.0] * 10 and len(pool.answers) == 1

    def test_a_5xx_without_retry_after_is_not_resent(self, slept: list[float]) -> None:
        client, pool = client_with([answer(500), answer(200)], slept)
        with pytest.raises(ApiError) as raised:
            client.get("/api/v1/nodes")
        assert raised.value.status == 500 and len(pool.sent) == 1 and client.retried() == {}

    def test_a_broken_connection_resends_a_get_after_a_second_never_a_post(self, slept: list[float]) -> None:
        client, pool = client_with([ConnectionResetError(104, "reset"), answer(200, body=b"{}")], slept)
        assert client.get("/api/v1/nodes") == {}
        assert slept == [1.0] and client.retried() == {("LIST", "nodes"): Retried(1, 1.0)}
        client, pool = client_with([ConnectionResetError(104, "reset"), answer(201)], slept)
        with pytest.raises(ApiError) as raised:
            client.create("/api/v1/nodes", {})
        assert raised.value.status == 0 and len(pool.sent) == 1

    def test_a_refused_connection_is_not_resent(self, slept: list[float]) -> None:
        client, pool = client_with([urllib3.exceptions.NewConnectionError(None, "refused"), answer(200)], slept)
        with pytest.raises(ApiError):
            client.get("/api/v1/nodes")
        assert len(pool.sent) == 1 and slept == []

    def test_the_availability_probes_rule_sends_a_reset_get_once_more_at_once(self, slept: list[float]) -> None:
        client, pool = client_with([urllib3.exceptions.ProtocolError("aborted"), answer(429, REFUSED)], slept,
                                   retry=ONCE_ON_RESET)
        with pytest.raises(ApiError) as raised:
            client.get("/api/v1/namespaces/default")
        assert raised.value.status == 429 and len(pool.sent) == 2 and slept == [0.0]

    def test_a_refused_watch_is_resent_and_the_stream_is_the_last_answers(self, slept: list[float]) -> None:
        client, pool = client_with([answer(429, REFUSED), answer(200, body=b"")], slept)
        assert list(client.watch("pods", "a", timeout_s=5)) == []  # the 200's (empty) stream, read to its end
        assert len(pool.sent) == 2 and client.retried() == {("WATCH", "pods"): Retried(1, 1.0)}


# --- the load's KubeApi, over recorded answers -----------------------------------------------------------


class RecordedResponse:
    """What Locust's FastHttpSession hands the transport inside `with session.request(...)`."""

    def __init__(self, status: int, headers: dict[str, str] | None = None, error: BaseException | None = None,
                 content: bytes = b"{}") -> None:
        self.status_code, self.headers, self.error, self.content = status, headers or {}, error, content
        self.request_meta: dict[str, Any] = {}
        self.outcome = ""
        self.released = False

    def success(self) -> None:
        self.outcome = "ok"

    def failure(self, message: str) -> None:
        self.outcome = message

    @property
    def _response(self) -> RecordedResponse:
        return self

    def release(self) -> None:
        self.released = True


class RequestEvent:
    def __init__(self) -> None:
        self.fired: list[dict[str, Any]] = []

    def fire(self, **event: Any) -> None:
        self.fired.append(event)


class RecordedSession:
    def __init__(self, answers: list[RecordedResponse]) -> None:
        self.answers = answers
        self.request_event = RequestEvent()
        self.attempts: list[RecordedResponse] = []

    @contextlib.contextmanager
    def request(self, method: str, path: str, **_options: Any) -> Iterator[RecordedResponse]:
        response = self.answers.pop(0)
        self.attempts.append(response)
        yield response


def kube_api(answers: list[RecordedResponse], slept: list[float]) -> tuple[KubeApi, RecordedSession]:
    session = RecordedSession(answers)
    return KubeApi(session, sleep=slept.append), session  # type: ignore[arg-type]


class TestKubeApi:
    def test_every_attempt_is_recorded_and_each_resend_is_a_retry_row_of_the_same_name(
            self, slept: list[float]) -> None:
        api, session = kube_api([RecordedResponse(429, REFUSED), RecordedResponse(429, {"Retry-After": "2"}),
                                 RecordedResponse(201)], slept)
        assert api.create("pods", "a", b"{}", "POST pods") == 201
        assert [a.outcome for a in session.attempts] == ["HTTP 429", "HTTP 429", "ok"]
        assert slept == [1.0, 2.0]
        assert [(e["request_type"], e["name"], e["response_time"]) for e in session.request_event.fired] == [
            (RETRIED, "POST pods", 1000.0), (RETRIED, "POST pods", 2000.0)]

    def test_still_refused_after_ten_resends_is_a_failure(self, slept: list[float]) -> None:
        api, session = kube_api([RecordedResponse(429, REFUSED) for _ in range(12)], slept)
        assert api.get("pods", "a", "p", "GET pods")[0] == 429
        assert len(session.attempts) == 11 and len(session.request_event.fired) == 10
        assert session.attempts[-1].outcome == "HTTP 429"

    def test_a_broken_connection_resends_a_get_only(self, slept: list[float]) -> None:
        api, session = kube_api([RecordedResponse(0, error=HTTPConnectionClosed("closed")), RecordedResponse(200)],
                                slept)
        assert api.get("pods", "a", "p", "GET pods")[0] == 200 and slept == [1.0]
        api, session = kube_api([RecordedResponse(0, error=ConnectionResetError()), RecordedResponse(200)], slept)
        assert api.delete("pods", "a", "p", "DELETE pods") == 0 and len(session.attempts) == 1
        api, session = kube_api([RecordedResponse(0, error=ConnectionRefusedError()), RecordedResponse(200)], slept)
        assert api.get("pods", "a", "p", "GET pods")[0] == 0 and len(session.attempts) == 1

    def test_a_refused_watch_gives_its_connection_back_before_the_resend(self, slept: list[float]) -> None:
        refused = RecordedResponse(429, REFUSED)
        api, session = kube_api([refused, RecordedResponse(410, content=b'{"reason": "Expired"}')], slept)
        with pytest.raises(Exception, match="410"):
            api.watch("pods", "a", "WATCH pods")
        assert refused.released and len(session.attempts) == 2


# --- the reflector's backoff -----------------------------------------------------------------------------


class TestBackoff:
    def test_client_gos_waits_double_from_800_ms_to_30_s_each_up_to_twice_as_long(self) -> None:
        slept: list[float] = []
        rng = random.Random(7)
        backoff = Backoff.client_go(sleep=slept.append, rng=rng, clock=lambda: 0.0)
        for _ in range(9):
            backoff.wait()
        delays = [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0, 30.0]
        assert all(d <= s < 2 * d + 1e-9 for s, d in zip(slept, delays, strict=True)), slept

    def test_client_gos_starts_over_two_minutes_after_it_last_did_not_on_a_success(self) -> None:
        now = [0.0]
        slept: list[float] = []
        backoff = Backoff.client_go(sleep=slept.append, rng=random.Random(1), clock=lambda: now[0])
        for _ in range(4):
            backoff.wait()
        backoff.reset()  # a watch that went well: client-go's reflector does not start over for it
        backoff.wait()
        assert 12.8 <= slept[-1] < 25.6
        now[0] = 120.5  # more than 2 min after its creation
        backoff.wait()
        assert 0.8 <= slept[-1] < 1.6
        now[0] = 200.0  # 79.5 s after that start-over: it goes on doubling
        backoff.wait()
        assert 1.6 <= slept[-1] < 3.2

    def test_the_default_is_unchanged_half_to_one_and_a_half_times_and_a_success_starts_over(self) -> None:
        slept: list[float] = []
        backoff = Backoff(sleep=slept.append, rng=random.Random(3))
        backoff.wait()
        backoff.wait()
        backoff.reset()
        backoff.wait()
        assert 0.25 <= slept[0] < 0.75 and 0.5 <= slept[1] < 1.5 and 0.25 <= slept[2] < 0.75

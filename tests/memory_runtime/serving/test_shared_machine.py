"""Safe on a shared machine: the server answers only to its own names (Host), takes changes only
from its own pages (Origin), slows a client that guesses keys, and will not put memlm's public
demo key on a network unless told twice.

In-process tests drive the app with TestClient; the browser tests run headless Chromium (as
test_ui) with `--host-resolver-rules` mapping a foreign name, evil.test, to 127.0.0.1: DNS
rebinding as an attacker's page would do it.
"""

import re
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from memlm.cli import app as cli_app
from memory_runtime.memory.store import TripletStore
from memory_runtime.serving.app import create_app
from memory_runtime.serving.keys import FailedKeys, shipped_demo_keys
from memory_runtime.serving.launch import background_server, check_demo_keys
from memory_runtime.serving.middleware import AllowedHosts
from memory_runtime.serving.serve_config import Limits, ServeConfig
from memory_runtime.yaml_config import ConfigError
from tests.memory_runtime.serving.test_ui import chromium

REPO = Path(__file__).resolve().parents[3]
SHIPPED = REPO / "configs" / "serve" / "default.yaml"
DEMO_KEYS = yaml.safe_load(SHIPPED.read_text())["api_keys"]  # what anyone can read: {key: namespace}
DEMO_KEY, DEMO = next(iter(DEMO_KEYS.items()))
FACT = {"subject": "Mallory Evil", "relation": "founder of", "object": "Google"}


def config(**fields) -> ServeConfig:
    limits = fields.pop("limits", Limits())
    return ServeConfig(api_keys=DEMO_KEYS, api_keys_env=None, limits=limits, **fields)


def auth(key: str = DEMO_KEY) -> dict:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def store():
    with TripletStore() as s:
        yield s


def client(app, address: str = "127.0.0.1:8000", ip: str = "127.0.0.1") -> TestClient:
    """A client that names the server `address` (its Host) and comes from `ip`."""
    return TestClient(app, base_url=f"http://{address}", client=(ip, 50000))


# --------------------------------------------------------------------------- Host


def test_a_foreign_host_gets_400_in_the_servers_error_format_and_writes_nothing(store):
    with client(create_app(config(), store, None, model_name="none")) as c:
        for host in ("127.0.0.1:8000", "localhost:8000", "LOCALHOST", "[::1]:8000", "localhost."):
            assert c.get("/health", headers={"Host": host}).status_code == 200, host
        assert c.post("/v1/memory/facts", json=FACT, headers=auth()).status_code == 200  # the control
        store.forget("Mallory Evil", namespace=DEMO, purge=True)
        for host in ("evil.test:8000", "evil.test", "127.0.0.1.evil.test", "10.1.2.3:8000", "", "a b", "x:port"):
            r = c.post("/v1/memory/facts", json=FACT, headers={**auth(), "Host": host})
            assert r.status_code == 400, host
            error = r.json()["error"]
            assert error["code"] == "invalid_host" and error["type"] == "invalid_request_error"
            assert "\n" not in error["message"] and "--allow-host" in error["message"]
        assert c.get("/ui", headers={"Host": "evil.test:8000"}).status_code == 400  # the page itself too
        assert (
            "Host 'evil.test:8000' is not a name of this server" in c.get("/", headers={"Host": "evil.test:8000"}).text
        )
        assert store.facts(DEMO) == []
        assert c.get("/metrics").json()["requests"]["other"]["status"]["400"] == 1  # refusals are counted


def test_allowed_hosts_adds_names_and_a_star_answers_to_any(store):
    app = create_app(config(allowed_hosts=["memlm.example.com", "[fd00::5]"]), store, None, model_name="none")
    with client(app) as c:
        assert c.get("/health", headers={"Host": "memlm.example.com:443"}).status_code == 200
        assert c.get("/health", headers={"Host": "[fd00::5]:8000"}).status_code == 200
        assert c.get("/health", headers={"Host": "localhost"}).status_code == 200  # loopback's names stay
        assert c.get("/health", headers={"Host": "other.example.com"}).status_code == 400
    with client(create_app(config(allowed_hosts=["*"]), store, None, model_name="none")) as c:
        assert c.get("/health", headers={"Host": "anything.test"}).status_code == 200
    with pytest.raises(ConfigError, match=r"allowed_hosts: 'memlm\.example\.com:8000' is not a host name"):
        ServeConfig.from_dict({"allowed_hosts": ["memlm.example.com:8000"]})


def test_the_names_of_each_listening_address():
    loopback = AllowedHosts.listening_on("127.0.0.1")
    assert loopback.names == {"localhost", "127.0.0.1", "::1"} and not loopback.any_ip
    assert not loopback.allows("10.0.0.5") and not loopback.allows("evil.test")
    one = AllowedHosts.listening_on("10.0.0.5", ["memlm.lan"])
    assert one.allows("10.0.0.5") and one.allows("memlm.lan") and not one.allows("localhost")
    assert not one.allows("10.0.0.6")
    every = AllowedHosts.listening_on("0.0.0.0")
    assert every.allows("localhost") and every.allows("192.168.1.20") and every.allows("fe80::1")
    assert not every.allows("evil.test")  # rebinding needs a name: names must be known


# --------------------------------------------------------------------------- Origin


def test_a_change_from_a_page_of_another_origin_is_refused(store):
    with client(create_app(config(), store, None, model_name="none")) as c:
        ok = c.post("/v1/memory/facts", json=FACT, headers={**auth(), "Origin": "http://127.0.0.1:8000"})
        assert ok.status_code == 200  # the page's own origin
        assert c.post("/v1/memory/facts", json=FACT, headers=auth()).status_code == 200  # no Origin: curl, SDKs
        for origin in (
            "http://evil.test:8000",
            "http://evil.test",
            "http://127.0.0.1:9000",  # another port: another origin
            "https://127.0.0.1:8000",  # another scheme
            "http://localhost:8000",  # another allowed name, but not the one this request names
            "null",  # a sandboxed frame, a file:// page
        ):
            r = c.delete(
                "/v1/memory/facts",
                params={"subject": "Mallory Evil", "purge": True},
                headers={**auth(), "Origin": origin},
            )
            assert r.status_code == 403, origin
            assert r.json()["error"]["code"] == "invalid_origin" and origin in r.json()["error"]["message"]
        assert [f.object for f in store.facts(DEMO)] == ["Google"]  # nothing erased
        read = c.get("/v1/memory/facts", headers={**auth(), "Origin": "http://evil.test"})
        assert read.status_code == 200  # reads pass: without CORS headers a foreign page cannot see them
        assert "access-control-allow-origin" not in read.headers
        form = c.post(  # a cross-site form post, which cannot carry the key, gets no further than its Origin
            "/v1/memory/import", data={"facts": "x"}, headers={"Origin": "http://evil.test"}
        )
        assert form.status_code == 403 and form.json()["error"]["code"] == "invalid_origin"


# --------------------------------------------------------------------------- guessing keys


OTHER_KEY = "other-key-0001"  # a right key never used from the flooded address


def test_wrong_keys_slow_an_address_and_lock_out_no_right_key(store):
    keys = {**DEMO_KEYS, OTHER_KEY: "other"}
    app = create_app(config(limits=Limits(max_failed_keys=3)), store, None, model_name="none", api_keys=keys)
    now = [1000.0]
    app.state.server.failed_keys.clock = lambda: now[0]
    with client(app) as c, client(app, ip="10.0.0.2") as other:
        assert c.get("/v1/memory/facts", headers=auth()).status_code == 200  # signed in before the flood
        assert all(c.get("/v1/memory/facts").status_code == 401 for _ in range(5))  # no key: no guess
        statuses = [c.get("/v1/memory/facts", headers=auth(f"guess-{i:06d}")).status_code for i in range(500)]
        # three wrong keys, then one key checked every 60/3 = 20 s: the fourth, then none
        assert statuses[:4] == [401] * 4 and set(statuses[4:]) == {429}
        assert c.get("/v1/memory/facts", headers=auth()).status_code == 200  # the key used from here works on
        r = c.get("/v1/memory/facts", headers=auth(OTHER_KEY))  # not yet used from here: unchecked, so no oracle
        assert r.status_code == 429 and r.headers["retry-after"] == "20"
        error = r.json()["error"]
        assert error["code"] == "too_many_failed_keys" and error["type"] == "rate_limit_error"
        assert error["message"] == (
            "too many wrong API keys from this address (3 in 60 s): a key not yet used from here is checked once "
            "every 20 s; retry in 20 s"
        )
        assert other.get("/v1/memory/facts", headers=auth(OTHER_KEY)).status_code == 200  # per address
        now[0] += 20  # the next check: a right key gets it, and works on from then
        assert c.get("/v1/memory/facts", headers=auth(OTHER_KEY)).status_code == 200
        assert c.get("/v1/memory/facts", headers=auth("guess-again0")).status_code == 429  # that check is taken
        assert c.get("/v1/memory/facts", headers=auth(OTHER_KEY)).status_code == 200
        now[0] += 61  # every wrong key has left the window: three guesses again, then one per 20 s
        statuses = [c.get("/v1/memory/facts", headers=auth(f"guess-again{i}")).status_code for i in range(6)]
        assert statuses == [401, 401, 401, 401, 429, 429]


def test_failed_keys_count_in_a_sliding_window_and_stay_bounded():
    now = [0.0]
    failed = FailedKeys(2, 10.0, clock=lambda: now[0], max_clients=3)
    right, guess = b"right-digest", b"guess-digest"
    failed.succeeded("1.2.3.4", right)
    failed.record("1.2.3.4")
    now[0] = 4.0
    failed.record("1.2.3.4")
    assert failed.retry_after("1.2.3.4", right) is None  # proven here: never slowed
    assert failed.retry_after("1.2.3.4", guess) is None  # the one check of the moment
    assert failed.retry_after("1.2.3.4", guess) == 5.0  # the next: in spacing (10 / 2) seconds
    assert failed.retry_after("1.2.3.5", guess) is None
    now[0] = 10.0
    assert failed.retry_after("1.2.3.4", guess) is None  # the first has left the window
    failed.record("2001:db8::1")
    failed.record("2001:db8::ffff")  # the same /64: one host
    assert failed.retry_after("2001:db8::abcd", guess) is None and failed.retry_after("2001:db8::abcd", guess) > 0
    assert failed.retry_after("2001:db8:0:1::1", guess) is None
    for i in range(100):  # many addresses, many wrong keys and right ones: the memory stays bounded
        for _ in range(50):
            failed.record(f"10.0.{i}.1")
        failed.succeeded(f"10.0.{i}.1", bytes([i]))
    assert len(failed._failures) <= 3 and len(failed._proven) <= 3 and len(failed._checked) <= 3
    assert all(len(times) <= 3 for times in failed._failures.values())


def test_a_forged_forwarded_address_spreads_no_guess_and_locks_out_no_one(store):
    """uvicorn believes X-Forwarded-For from 127.0.0.1 by default: the server runs it without, so a
    client is its connection's address whatever it claims; the operator names the proxies to believe."""
    import httpx

    keys = {**DEMO_KEYS, OTHER_KEY: "other"}
    app = create_app(config(limits=Limits(max_failed_keys=3)), store, None, model_name="none", api_keys=keys)
    with background_server(app) as url, httpx.Client(base_url=url) as http:
        statuses = [
            http.get(
                "/v1/memory/facts", headers={**auth(f"guess-{i:06d}"), "X-Forwarded-For": f"10.1.{i // 250}.{i % 250}"}
            )
            for i in range(200)
        ]
        assert sum(r.status_code == 401 for r in statuses) == 4  # 0 bypasses: 3 guesses and one checked later
        forged = {**auth(OTHER_KEY), "X-Forwarded-For": "10.9.9.9"}  # "10.9.9.9" did nothing wrong, nor is it here
        assert http.get("/v1/memory/facts", headers=forged).status_code == 429
    trusted = config(limits=Limits(max_failed_keys=3), forwarded_allow_ips=["127.0.0.1"])
    app = create_app(trusted, store, None, model_name="none", api_keys=keys)
    with background_server(app) as url, httpx.Client(base_url=url) as http:  # behind a proxy on 127.0.0.1
        for i in range(5):
            http.get("/v1/memory/facts", headers={**auth(f"guess-{i}"), "X-Forwarded-For": "10.2.0.1"})
        assert (
            http.get("/v1/memory/facts", headers={**auth(OTHER_KEY), "X-Forwarded-For": "10.2.0.1"}).status_code == 429
        )
        assert (
            http.get("/v1/memory/facts", headers={**auth(OTHER_KEY), "X-Forwarded-For": "10.2.0.2"}).status_code == 200
        )


def test_the_proxies_to_believe_are_checked_addresses():
    with pytest.raises(ValueError, match="not an IP address or network"):
        ServeConfig(api_keys=DEMO_KEYS, forwarded_allow_ips=["proxy.example.com"])
    assert ServeConfig(api_keys=DEMO_KEYS, forwarded_allow_ips=["10.0.0.0/8", "::1", "*"]).forwarded_allow_ips


# --------------------------------------------------------------------------- the demo key beyond loopback


def test_the_shipped_demo_key_is_refused_beyond_loopback_unless_told_twice():
    assert shipped_demo_keys()[DEMO_KEY] == SHIPPED
    own = {"a-key-of-our-own": "alice"}
    for host in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        assert check_demo_keys(host, DEMO_KEYS, config(), allow_demo_key=False) is None
    assert check_demo_keys("0.0.0.0", own, config(), allow_demo_key=False) is None
    with pytest.raises(ConfigError) as err:
        check_demo_keys("0.0.0.0", {**own, **DEMO_KEYS}, config(), allow_demo_key=False)
    message = str(err.value)
    assert message.startswith("refusing to listen on 0.0.0.0 with memlm's public demo key")
    assert f"namespace '{DEMO}'" in message and "configs/serve/default.yaml" in message and "\n" not in message
    assert "--allow-demo-key and allow_demo_key: true" in message and "only" not in message
    with pytest.raises(ConfigError, match=r"\(only --allow-demo-key was given\)"):
        check_demo_keys("10.0.0.5", DEMO_KEYS, config(), allow_demo_key=True)
    with pytest.raises(ConfigError, match=r"\(only allow_demo_key: true was given\)"):
        check_demo_keys("myhost", DEMO_KEYS, config(allow_demo_key=True), allow_demo_key=False)
    warning = check_demo_keys("0.0.0.0", DEMO_KEYS, config(allow_demo_key=True), allow_demo_key=True)
    assert warning.startswith("WARNING: listening on 0.0.0.0 with memlm's public demo key")


def test_memlm_ui_and_serve_refuse_the_demo_key_on_every_interface(tmp_path, monkeypatch):
    import uvicorn

    db = tmp_path / "m.sqlite"
    TripletStore(db).close()
    runner = CliRunner(env={"MEMLM_API_KEYS": ""})
    r = runner.invoke(cli_app, ["ui", "--db", str(db), "--host", "0.0.0.0"])  # the shipped config
    assert r.exit_code == 2 and "refusing to listen on 0.0.0.0 with memlm's public demo key" in r.output
    r = runner.invoke(cli_app, ["ui", "--db", str(db), "--host", "0.0.0.0", "--allow-demo-key"])
    assert r.exit_code == 2 and "only --allow-demo-key was given" in r.output
    missing = tmp_path / "new.sqlite"  # serve refuses before the memory or the model is opened
    r = runner.invoke(cli_app, ["serve", "--db", str(missing), "--host", "0.0.0.0", "allow_demo_key=true"])
    assert r.exit_code == 2 and "only allow_demo_key: true was given" in r.output and not missing.exists()

    seen = {}

    def run(
        app, host, port, log_level, proxy_headers, http, loop
    ):  # instead of serving: look at the app memlm ui built
        assert proxy_headers is False  # uvicorn believes no X-Forwarded-For: the app decides (forwarded_allow_ips)
        with TestClient(app, base_url="http://192.168.1.20:8123") as c:
            seen["ip"] = c.get("/health").status_code
            seen["named"] = c.get("/health", headers={"Host": "memlm.lan:8123"}).status_code
            seen["foreign"] = c.get("/health", headers={"Host": "evil.test:8123"}).status_code
        seen["address"] = (host, port)

    monkeypatch.setattr(uvicorn, "run", run)
    args = ["ui", "--db", str(db), "--host", "0.0.0.0", "--port", "8123", "--allow-host", "Memlm.LAN"]
    r = runner.invoke(cli_app, [*args, "--allow-demo-key", "allow_demo_key=true"])
    assert r.exit_code == 0, r.output
    assert "WARNING: listening on 0.0.0.0 with memlm's public demo key" in r.output
    assert seen == {"ip": 200, "named": 200, "foreign": 400, "address": ("0.0.0.0", 8123)}
    r = runner.invoke(cli_app, ["ui", "--db", str(db), "--allow-host", "http://memlm.lan"])
    assert r.exit_code == 2 and "is not a host name" in r.output
    for command in ("ui", "serve"):
        help_text = runner.invoke(cli_app, [command, "--help"], terminal_width=200).output
        assert "--allow-host" in help_text and "--allow-demo-key" in help_text


# --------------------------------------------------------------------------- in a browser


@pytest.fixture(scope="module")
def browser():
    """Chromium that resolves evil.test to 127.0.0.1, as a rebinding attacker's DNS would."""
    yield from chromium("--host-resolver-rules=MAP evil.test 127.0.0.1")


def rebound_page(browser, origin: str, status: int):
    """A document of `origin` (evil.test) that the browser loaded from 127.0.0.1, as after the
    attacker's DNS answer changed: its scripts may fetch `origin` as their own, and do here."""
    page = browser.new_page()
    assert page.goto(f"{origin}/health").status == status
    return page


WRITE_AND_READ = """async ([key, fact]) => {
    const headers = {Authorization: "Bearer " + key, "Content-Type": "application/json"};
    const write = await fetch("/v1/memory/facts", {method: "POST", headers, body: JSON.stringify(fact)});
    const read = await fetch("/v1/memory/facts", {headers});
    return [write.status, (await write.json()).error?.code ?? null, read.status, await read.text()];
}"""


def test_dns_rebinding_a_page_on_a_foreign_name_cannot_write(browser, store):
    with background_server(create_app(config(), store, None, model_name="none")) as url:
        port = url.rsplit(":", 1)[1]
        page = rebound_page(browser, f"http://evil.test:{port}", 400)  # even /health answers 400
        write, code, read, text = page.evaluate(WRITE_AND_READ, [DEMO_KEY, FACT])  # same origin for the browser
        assert (write, code, read) == (400, "invalid_host", 400) and "Google" not in text
        assert store.facts(DEMO) == []
        assert page.goto(f"http://evil.test:{port}/ui").status == 400  # nor can it open the page
        page.close()
    # the control: a server that answers to evil.test is reached by the same page, and written to
    with background_server(create_app(config(allowed_hosts=["evil.test"]), store, None, model_name="none")) as url:
        page = rebound_page(browser, f"http://evil.test:{url.rsplit(':', 1)[1]}", 200)
        write, _, read, text = page.evaluate(WRITE_AND_READ, [DEMO_KEY, FACT])
        assert (write, read) == (200, 200) and "Google" in text
        page.close()


def test_guessing_keys_in_the_page_meets_the_limit(browser, store):
    from playwright.sync_api import expect

    app = create_app(config(limits=Limits(max_failed_keys=3)), store, None, model_name="none")
    with background_server(app) as url:
        signed_in = browser.new_page()  # a user of this machine, signed in before anyone guesses
        signed_in.goto(f"{url}/ui")
        signed_in.fill("#key", DEMO_KEY)
        signed_in.click("#sign-in-form button")
        expect(signed_in.locator("#app")).to_be_visible()
        page = browser.new_page()
        page.goto(f"{url}/ui")
        for guess in ("guess-000001", "guess-000002"):
            page.fill("#key", guess)
            page.click("#sign-in-form button")
            expect(page.locator("#sign-in-error")).to_have_text("This key is not known to the server.")
            page.evaluate("document.getElementById('sign-in-error').textContent = ''")  # the next answer is new
        flood = page.evaluate(
            """async () => {
                const statuses = [];
                for (let i = 0; i < 50; i++) {
                    const r = await fetch("/v1/memory/facts", {headers: {Authorization: "Bearer guess-flood-" + i}});
                    statuses.push(r.status);
                }
                return statuses;
            }"""
        )
        assert flood == [401, 401] + [429] * 48  # the third wrong key, the one check of the moment, then none
        page.fill("#key", "guess-000003")
        page.click("#sign-in-form button")
        expect(page.locator("#sign-in-error")).to_have_text(
            re.compile(
                r"too many wrong API keys from this address \(3 in 60 s\): a key not yet used from here is checked"
                r" once every 20 s; retry in (19|20) s"
            )
        )
        page.fill("#key", DEMO_KEY)  # the key this address signed in with: not locked out by the flood
        page.click("#sign-in-form button")
        expect(page.locator("#app")).to_be_visible()
        signed_in.reload()  # it signs in again with its key, and reads its facts
        expect(signed_in.locator("#app")).to_be_visible()
        expect(signed_in.locator("#sign-in-error")).to_have_text("")
        page.close()
        signed_in.close()


def test_a_cross_site_form_is_refused_and_the_page_writes_from_its_own_origin(browser, store):
    from playwright.sync_api import expect

    with background_server(create_app(config(), store, None, model_name="none")) as url:
        attacker = browser.new_page()
        form = (
            f'<form method="post" action="{url}/v1/memory/facts"><input name="subject" value="Mallory Evil">'
            '<input name="relation" value="founder of"><input name="object" value="Google"><button>go</button></form>'
        )
        attacker.route("http://other.test/", lambda route: route.fulfill(content_type="text/html", body=form))
        attacker.goto("http://other.test/")
        with attacker.expect_navigation() as posted:
            attacker.click("button")
        assert posted.value.status == 403 and "invalid_origin" in attacker.content()
        attacker.close()
        assert store.facts(DEMO) == []

        page = browser.new_page()  # the memory page under another of the server's names: Origin matches
        page.goto(url.replace("127.0.0.1", "localhost") + "/ui")
        page.fill("#key", DEMO_KEY)
        page.click("#sign-in-form button")
        expect(page.locator("#namespace")).to_have_text(DEMO)
        page.click("#add-fact")
        page.fill("#f-subject", "Tia Batres")
        page.fill("#f-relation", "lives in")
        page.fill("#f-object", "Lyon")
        page.click("#fact-save")
        expect(page.locator("#status")).to_have_text("Added Tia Batres · lives in · Lyon.")
        assert [f.object for f in store.facts(DEMO)] == ["Lyon"]
        page.close()

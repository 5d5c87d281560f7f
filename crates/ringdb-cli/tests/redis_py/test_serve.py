"""redis-py (the real client, RESP2 and RESP3) against `ringdb serve`.

Run by crates/ringdb-cli/tests/redis_py.rs, which starts the server and passes its port:
    python3 test_serve.py PORT
Every implemented command is driven through redis-py's own methods, in both protocols, with
pipelines with and without MULTI/EXEC, WATCH through redis-py's transaction helper, and values large enough to be stored in chunks; what the server does not do (pub/sub) must be refused
with an error reply, not a hang or a dropped connection. Exits non-zero on the first failure.
"""

import socket
import sys
import time

import redis


def check(label, got, expected):
    if got != expected:
        raise AssertionError(f"{label}: got {got!r}, expected {expected!r}")


def strings(r, p):
    check("set", r.set(p + "s", "v"), True)
    check("get", r.get(p + "s"), b"v")
    check("get missing", r.get(p + "missing"), None)
    check("set nx on existing", r.set(p + "s", "w", nx=True), None)
    check("set xx", r.set(p + "s", "w", xx=True), True)
    check("set get", r.set(p + "s", "x", get=True), b"w")
    check("setnx", r.setnx(p + "n", "1"), True)
    check("setnx again", r.setnx(p + "n", "2"), False)
    check("getset", r.getset(p + "n", "3"), b"1")
    check("getdel", r.getdel(p + "n"), b"3")
    check("getdel gone", r.get(p + "n"), None)
    check("setex", r.setex(p + "e", 100, "v"), True)
    check("ttl", r.ttl(p + "e"), 100)
    check("psetex", r.psetex(p + "pe", 100000, "v"), True)
    check("pttl range", 99000 < r.pttl(p + "pe") <= 100000, True)
    check("getex persist", r.getex(p + "e", persist=True), b"v")
    check("ttl after persist", r.ttl(p + "e"), -1)
    check("append", r.append(p + "a", "hello"), 5)
    check("append more", r.append(p + "a", " world"), 11)
    check("strlen", r.strlen(p + "a"), 11)
    check("getrange", r.getrange(p + "a", 0, 4), b"hello")
    check("setrange", r.setrange(p + "a", 6, "there"), 11)
    check("get after setrange", r.get(p + "a"), b"hello there")
    check("incr", r.incr(p + "i"), 1)
    check("incrby", r.incrby(p + "i", 10), 11)
    check("decr", r.decr(p + "i"), 10)
    check("decrby", r.decrby(p + "i", 4), 6)
    check("incrbyfloat", r.incrbyfloat(p + "f", 1.5), 1.5)
    check("incrbyfloat again", r.incrbyfloat(p + "f", 2.25), 3.75)
    check("mset", r.mset({p + "m1": "a", p + "m2": "b", p + "m3": "c"}), True)
    check("mget", r.mget([p + "m1", p + "m2", p + "nope", p + "m3"]), [b"a", b"b", None, b"c"])
    check("msetnx blocked", r.msetnx({p + "m1": "z", p + "m9": "z"}), False)
    check("msetnx", r.msetnx({p + "m8": "z", p + "m9": "z"}), True)
    try:
        r.incr(p + "a")
        raise AssertionError("incr of a non-integer must fail")
    except redis.ResponseError as error:
        check("incr error", str(error), "value is not an integer or out of range")


def keys(r, p):
    r.set(p + "k1", "1")
    r.set(p + "k2", "2")
    check("exists", r.exists(p + "k1", p + "k2", p + "none"), 2)
    check("type", r.type(p + "k1"), b"string")
    check("type none", r.type(p + "none"), b"none")
    check("expire", r.expire(p + "k1", 100), True)
    check("expire nx", r.expire(p + "k1", 50, nx=True), False)
    check("expire gt", r.expire(p + "k1", 200, gt=True), True)
    check("ttl", r.ttl(p + "k1"), 200)
    check("expiretime", r.expiretime(p + "k1") > time.time(), True)
    check("persist", r.persist(p + "k1"), True)
    check("pexpire", r.pexpire(p + "k2", 50), True)
    time.sleep(0.1)
    check("expired", r.get(p + "k2"), None)
    check("touch", r.touch(p + "k1", p + "k2"), 1)
    check("delete", r.delete(p + "k1", p + "k2"), 1)
    check("unlink", r.unlink(p + "k1"), 0)
    for i in range(30):
        r.set(f"{p}scan:{i}", i)
    found = set(r.scan_iter(match=f"{p}scan:*", count=7))
    check("scan finds all", len(found), 30)
    check("keys", len(r.keys(f"{p}scan:1*")), 11)
    # RANDOMKEY draws from the whole key space (the database holds other sections' keys too),
    # not the first key every time.
    drawn = {r.randomkey() for _ in range(60)}
    check("randomkey varies", len(drawn) > 10, True)
    check("randomkey live", all(r.exists(key) for key in drawn), True)


def session(r, protocol):
    check("ping", r.ping(), True)
    check("echo", r.echo("hi"), b"hi")
    check("client setname", r.client_setname("tester"), True)
    name = r.client_getname()
    check("client getname", name.decode() if isinstance(name, bytes) else name, "tester")
    check("client id", r.client_id() > 0, True)
    check("select 0", r.select(0), True)
    try:
        r.select(1)
        raise AssertionError("select 1 must fail")
    except redis.ResponseError as error:
        check("select error", str(error), "DB index is out of range")
    info = r.info()
    check("info version", info["redis_version"], "7.0.15")
    check("dbsize type", isinstance(r.dbsize(), int), True)
    check("time", len(r.time()), 2)
    check("config get", r.config_get("maxclients")["maxclients"] is not None, True)
    check("command count", r.command_count() > 40, True)


def pipelines(r, p):
    pipe = r.pipeline(transaction=False)
    for i in range(100):
        pipe.set(f"{p}p:{i}", i)
        pipe.incr(f"{p}p:{i}")
    results = pipe.execute()
    check("pipeline replies", results[:4], [True, 1, True, 2])
    check("pipeline count", len(results), 200)
    check("pipeline value", r.get(f"{p}p:42"), b"43")
    pipe = r.pipeline(transaction=True)
    pipe.set(p + "tx", "1").incr(p + "tx").get(p + "tx")
    check("multi/exec", pipe.execute(), [True, 2, b"2"])
    pipe = r.pipeline(transaction=True)
    pipe.mset({p + "tx:a": "1", p + "tx:b": "2"}).mget([p + "tx:a", p + "tx:b"])
    check("multi/exec across keys", pipe.execute(), [True, [b"1", b"2"]])


def watches(r, p, port, protocol):
    """WATCH through redis-py's own optimistic-locking helpers: a write by another client
    (or by the same one, or an expiry) between WATCH and EXEC makes EXEC fail with WatchError."""
    other = redis.Redis(port=port, protocol=protocol)
    a, b = p + "w:a", p + "w:b"
    r.mset({a: 1, b: 1})
    pipe = r.pipeline()
    pipe.watch(a, b)
    check("watched read", pipe.get(a), b"1")
    other.incr(a)
    pipe.multi()
    pipe.incr(a).incr(b)
    try:
        pipe.execute()
        raise AssertionError("EXEC after a watched key changed must fail")
    except redis.WatchError:
        pass
    pipe.reset()
    r.set(p + "w:e", 1, px=50)
    pipe = r.pipeline()
    pipe.watch(p + "w:e")
    time.sleep(0.1)
    pipe.multi()
    pipe.get(p + "w:e")
    try:
        pipe.execute()
        raise AssertionError("EXEC after a watched key expired must fail")
    except redis.WatchError:
        pass
    pipe.reset()

    def move(pipe):
        values = [int(pipe.get(key)) for key in (a, b)]
        pipe.multi()
        pipe.set(a, values[0] - 1).set(b, values[1] + 1)

    check("transaction helper", r.transaction(move, a, b), [True, True])
    check("moved", r.mget([a, b]), [b"1", b"2"])
    check("msetnx taken", r.msetnx({p + "w:n1": 1, a: 9}), False)
    check("msetnx left nothing", r.get(p + "w:n1"), None)
    check("msetnx new", r.msetnx({p + "w:n1": 1, p + "w:n2": 2}), True)
    check("no watched key left", r.info("clients")["total_watched_keys"], 0)
    other.close()


def large_values(r, p):
    """Values past one B+tree record (stored in chunks) behave as small ones do."""
    big = bytes(range(256)) * 4000  # 1,024,000 bytes
    check("set large", r.set(p + "big", big), True)
    check("get large", r.get(p + "big"), big)
    check("strlen large", r.strlen(p + "big"), len(big))
    check("append large", r.append(p + "big", b"!"), len(big) + 1)
    check("getrange large", r.getrange(p + "big", len(big) - 2, -1), big[-2:] + b"!")
    check("mget large", r.mget([p + "big", p + "nothing"]), [big + b"!", None])
    pipe = r.pipeline(transaction=True)
    pipe.set(p + "big2", big[:5000]).get(p + "big2").delete(p + "big2")
    check("multi large", pipe.execute(), [True, big[:5000], 1])
    check("del large", r.delete(p + "big"), 1)
    check("get deleted", r.get(p + "big"), None)


def replaced_large_value(r, p):
    """A value of several megabytes written over one of its size: the batch (its chunks, the
    old chunks' deletes) dirties more pages than the default pool has clean (a livelock once)."""
    for fill in (b"a", b"b"):
        value = fill * 5_000_000
        check("set 5 MB", r.set(p + "huge", value), True)
        check("get 5 MB", r.get(p + "huge") == value, True)
    check("del 5 MB", r.delete(p + "huge"), 1)


def refused(label, call, expected):
    """`call` must get an error reply whose text contains `expected`."""
    try:
        call()
    except redis.ResponseError as error:
        check(label, expected in str(error), True)
        return
    raise AssertionError(f"{label}: no error reply")


def wait_gone(r, client_id):
    """Waits (bounded) until connection `client_id` left CLIENT LIST."""
    for _ in range(100):
        if not r.client_list(client_id=[client_id]):
            return
        time.sleep(0.02)
    raise AssertionError(f"client {client_id} still listed after CLIENT KILL")


def clients(r, port, protocol):
    """CLIENT LIST shows every connection, CLIENT KILL ends others (and itself, after its
    reply), COMMAND GETKEYS names a command's keys; their malformed forms get errors."""
    other = redis.Redis(port=port, protocol=protocol)
    other.client_setname("other")
    other_id = other.client_id()
    listed = r.client_list(client_id=[other_id])
    check("client list id", [c["name"] for c in listed], ["other"])
    check("client list laddr", listed[0]["laddr"].endswith(f":{port}"), True)
    check("client list all", len(r.client_list()) >= 2, True)
    refused("client list bad id", lambda: r.execute_command("CLIENT", "LIST", "ID", "0"), "Invalid client ID")
    refused("client kill nobody", lambda: r.execute_command("CLIENT", "KILL", "1.2.3.4:5"), "No such client")
    refused("client kill bad id", lambda: r.execute_command("CLIENT", "KILL", "ID", "x"), "client-id")
    refused("client kill bad filter", lambda: r.execute_command("CLIENT", "KILL", "COLOR", "red"), "syntax")
    check("client kill id", r.client_kill_filter(_id=other_id), 1)
    wait_gone(r, other_id)
    own = redis.Redis(port=port, protocol=protocol)
    own_id = own.client_id()
    check("client kill self", own.execute_command("CLIENT", "KILL", "ID", own_id, "SKIPME", "no"), 1)
    wait_gone(r, own_id)
    keys = r.command_getkeys("MSET", "a", "1", "b", "2")
    check("command getkeys", [k.encode() if isinstance(k, str) else k for k in keys], [b"a", b"b"])
    refused("getkeys unknown", lambda: r.command_getkeys("NOSUCH", "a"), "Invalid command")
    refused("getkeys no keys", lambda: r.command_getkeys("PING"), "no key arguments")
    refused("getkeys arity", lambda: r.command_getkeys("GET", "a", "b"), "number of arguments")
    check("still serving", r.ping(), True)
    idle_timeout(r, port)


def idle_timeout(r, port):
    """CONFIG SET timeout closes a connection that sends nothing for that long (Redis's
    `timeout`), not one that keeps sending; 0 turns it off again."""
    refused("config set timeout bad", lambda: r.config_set("timeout", "soon"), "Invalid argument")
    check("config set timeout", r.config_set("timeout", 1), True)
    check("config get timeout", r.config_get("timeout")["timeout"], "1")
    quiet = socket.create_connection(("127.0.0.1", port))
    quiet.sendall(b"PING\r\n")
    check("quiet ping", quiet.recv(64), b"+PONG\r\n")
    busy = socket.create_connection(("127.0.0.1", port))
    quiet.settimeout(10)
    started = time.monotonic()
    for _ in range(8):
        busy.sendall(b"PING\r\n")
        check("busy ping", busy.recv(64), b"+PONG\r\n")
        time.sleep(0.4)
    check("idle closed", quiet.recv(64), b"")
    check("idle closed within the run", time.monotonic() - started < 10, True)
    r.config_set("timeout", 0)
    busy.sendall(b"PING\r\n")
    check("busy kept", busy.recv(64), b"+PONG\r\n")
    quiet.close()
    busy.close()


def hscan_pages(r, h):
    """HSCAN returns a large hash a page at a time (about COUNT fields per call, each field
    once, the last page with cursor 0); fields that share their first 8 bytes come in one
    page, so the cursor always advances."""
    r.hset(h, mapping={f"f{i}": i for i in range(250)})
    cursor, seen, pages = 0, [], 0
    while True:
        cursor, page = r.hscan(h, cursor, count=7)
        check("hscan page size", len(page) <= 7, True)
        seen.extend(page)
        pages += 1
        if cursor == 0 or pages > 1000:
            break
    check("hscan pages", pages > 30, True)
    check("hscan every field once", sorted(seen), sorted(f"f{i}".encode() for i in range(250)))
    check("hscan novalues", r.hscan(h, 0, count=3, no_values=True)[1][0].startswith(b"f"), True)
    r.delete(h)
    r.hset(h, mapping={f"same-prefix-{i}": i for i in range(40)})
    cursor, page = r.hscan(h, 0, count=5)
    check("hscan shared prefix", (cursor, len(page)), (0, 40))
    refused("hscan bad cursor", lambda: r.hscan(h, -1), "invalid cursor")
    # After a write in the same transaction the hash is read whole (its pending fields too).
    pipe = r.pipeline(transaction=True)
    pipe.hset(h, "zz-new", 1).hscan(h, 0, count=2)
    cursor, page = pipe.execute()[1]
    check("hscan after a pending write", (cursor, len(page)), (0, 41))
    r.delete(h)


def hashes(r, p, protocol):
    h = p + "h"
    check("hset mapping", r.hset(h, mapping={"a": 1, "b": 2}), 2)
    check("hset existing", r.hset(h, "a", 3), 0)
    check("hget", r.hget(h, "a"), b"3")
    check("hget missing", r.hget(h, "zz"), None)
    check("hmget", r.hmget(h, ["a", "b", "zz"]), [b"3", b"2", None])
    check("hlen", r.hlen(h), 2)
    check("hgetall", r.hgetall(h), {b"a": b"3", b"b": b"2"})
    check("hkeys", sorted(r.hkeys(h)), [b"a", b"b"])
    check("hvals", sorted(r.hvals(h)), [b"2", b"3"])
    check("hexists", (r.hexists(h, "a"), r.hexists(h, "zz")), (True, False))
    check("hstrlen", r.hstrlen(h, "a"), 1)
    check("hincrby", r.hincrby(h, "n", 5), 5)
    check("hincrbyfloat", r.hincrbyfloat(h, "f", 1.5), 1.5)
    check("hsetnx taken", r.hsetnx(h, "a", "x"), 0)
    check("hsetnx new", r.hsetnx(h, "c", "x"), 1)
    check("hscan", r.hscan(h, 0, match="[ab]"), (0, {b"a": b"3", b"b": b"2"}))
    hscan_pages(r, h + "paged")
    every = r.hgetall(h)
    check("hrandfield", r.hrandfield(h) in every, True)
    check("hrandfield distinct", sorted(r.hrandfield(h, 9)), sorted(every))
    check("hrandfield repeated", len(r.hrandfield(h, -9)), 9)
    pairs = r.hrandfield(h, 2, withvalues=True)
    flat = pairs if protocol == 2 else [item for pair in pairs for item in pair]
    check("hrandfield withvalues", all(every[f] == v for f, v in zip(flat[::2], flat[1::2])), True)
    check("hrandfield withvalues count", len(flat), 4)
    check("hrandfield absent", r.hrandfield(h + "none"), None)
    check("type hash", r.type(h), b"hash")
    check("hdel", r.hdel(h, "a", "zz"), 1)
    try:
        r.get(h)
        raise AssertionError("GET on a hash must fail")
    except redis.ResponseError as error:
        check("wrongtype", str(error).startswith("WRONGTYPE"), True)
    try:
        r.hincrby(h, "c", 1)
        raise AssertionError("HINCRBY on a non-integer must fail")
    except redis.ResponseError as error:
        check("hincrby error", str(error), "hash value is not an integer")
    pipe = r.pipeline(transaction=True)
    pipe.hset(h + "2", "x", 1).hincrby(h + "2", "x", 1).hgetall(h + "2").delete(h + "2")
    check("hash in multi", pipe.execute(), [1, 2, {b"x": b"2"}, 1])
    check("del hash", r.delete(h), 1)
    check("hgetall gone", r.hgetall(h), {})


def renames(r, p):
    # Keys on either shard: some pairs share one, others do not.
    for n in range(4):
        a, b = f"{p}ra{n}", f"{p}rb{n}"
        r.set(a, "v", ex=100)
        check("rename", r.rename(a, b), True)
        check("renamed value", (r.get(a), r.get(b), r.ttl(b)), (None, b"v", 100))
        r.hset(a, "f", n)
        check("renamenx taken", r.renamenx(a, b), False)
        check("rename hash over string", r.rename(a, b), True)
        check("renamed hash", (r.type(b), r.hget(b, "f")), (b"hash", str(n).encode()))
    try:
        r.rename(p + "absent", p + "x")
        raise AssertionError("RENAME of a missing key must fail")
    except redis.ResponseError as error:
        check("rename missing", str(error), "no such key")


def refusals(r):
    try:
        r.publish("channel", "message")
        raise AssertionError("publish must be refused")
    except redis.ResponseError as error:
        check("publish refused", "pub/sub" in str(error), True)
    check("still serving", r.ping(), True)


def keyspace(r, p):
    """INFO keyspace counts the live keys (as DBSIZE does) and those with a deadline."""

    def counts():
        db0 = r.info("keyspace").get("db0", {})
        return db0.get("keys", 0), db0.get("expires", 0), db0.get("avg_ttl", 0)

    seen = []
    # A key an earlier check gave a short deadline may expire between two calls: try again.
    for _ in range(5):
        keys0, expires0, _ = counts()
        r.set(p + "ks:plain", "1")
        r.set(p + "ks:ttl", "1", ex=1000)
        keys1, expires1, average_ttl = counts()
        dbsize = r.dbsize()
        r.delete(p + "ks:plain", p + "ks:ttl")
        seen.append((keys0, expires0, keys1, expires1, dbsize))
        if (keys1, expires1) == (keys0 + 2, expires0 + 1) and keys1 == dbsize:
            check("keyspace avg_ttl", 0 < average_ttl <= 1_000_000, True)
            return
    raise AssertionError(f"INFO keyspace disagrees with the writes and DBSIZE: {seen}")


def main():
    port = int(sys.argv[1])
    for protocol in (2, 3):
        r = redis.Redis(port=port, protocol=protocol, socket_timeout=60)
        prefix = f"{time.time_ns()}:resp{protocol}:"
        strings(r, prefix)
        keys(r, prefix)
        session(r, protocol)
        pipelines(r, prefix)
        watches(r, prefix, port, protocol)
        large_values(r, prefix)
        replaced_large_value(r, prefix)
        clients(r, port, protocol)
        hashes(r, prefix, protocol)
        renames(r, prefix)
        keyspace(r, prefix)
        refusals(r)
        r.close()
        print(f"redis-py {redis.__version__}, RESP{protocol}: every check passed")


if __name__ == "__main__":
    main()

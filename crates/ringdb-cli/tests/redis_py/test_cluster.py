"""redis-py's RedisCluster against three `ringdb serve --cluster` nodes (ports 1-3) and a
standalone server (port 4): keys routed by slot, pipelines, multi-key commands split by the
client, each key stored on the node that owns its slot; then a writer with an acknowledgement
log while `ringdb cluster push` (argument 5: the binary, 6: the new topology) moves slots."""

import subprocess
import sys
import threading
import time

import redis
from redis.cluster import ClusterNode, RedisCluster


def check_cluster(ports):
    cluster = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", ports[1])])
    assert len(cluster.get_primaries()) == 3, cluster.get_primaries()
    for i in range(500):
        assert cluster.set(f"user:{i}", i)
    assert all(cluster.get(f"user:{i}") == str(i).encode() for i in range(500))
    pipe = cluster.pipeline()
    for i in range(100):
        pipe.incr(f"counter:{i % 10}")
    assert pipe.execute()[-1] == 10
    values = cluster.mget_nonatomic([f"user:{i}" for i in range(50)])
    assert values == [str(i).encode() for i in range(50)]
    assert cluster.delete("user:1", "user:2", "user:3") == 3
    assert cluster.mset({"{tag}a": 1, "{tag}b": 2})
    assert cluster.mget("{tag}a", "{tag}b") == [b"1", b"2"]
    # Each key lives on the node that owns its slot, and on no other.
    plain = [redis.Redis(port=port) for port in ports]
    for i in range(4, 60):
        key = f"user:{i}"
        owner = cluster.get_node_from_key(key)
        holders = [r for r in plain if r.connection_pool.connection_kwargs["port"] == owner.port]
        assert holders[0].get(key) == str(i).encode(), key
    total = sum(r.execute_command("CLUSTER", "COUNTKEYSINSLOT", cluster.keyslot("{tag}a")) for r in plain)
    assert total == 2, total
    info = plain[0].execute_command("CLUSTER", "INFO")
    assert b"cluster_state:ok" in (info if isinstance(info, bytes) else info.encode())
    cluster.close()


def check_standalone(port):
    # A standalone server answers CLUSTER SLOTS as one node owning every slot.
    cluster = RedisCluster(host="127.0.0.1", port=port)
    assert len(cluster.get_primaries()) == 1
    for i in range(100):
        cluster.set(f"solo:{i}", i)
    assert cluster.get("solo:42") == b"42"
    assert cluster.mget_nonatomic(["solo:1", "solo:2"]) == [b"1", b"2"]
    cluster.close()


def check_move_under_load(ports, ringdb, moved_topology):
    """A RedisCluster writer with an acknowledgement log while `ringdb cluster push` moves
    slots 2000-5460 to another node: redis-py follows -MOVED and retries -TRYAGAIN, and every
    acknowledged write is there afterwards."""
    cluster = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", ports[0])])
    acked = {}
    stop = threading.Event()

    def write():
        n = 0
        while not stop.is_set():
            key = f"moving:{n % 3000}"
            assert cluster.set(key, n)
            acked[key] = n
            n += 1

    writer = threading.Thread(target=write)
    writer.start()
    time.sleep(0.3)
    pushed = subprocess.run([ringdb, "cluster", "push", moved_topology], capture_output=True, text=True)
    time.sleep(0.3)
    stop.set()
    writer.join()
    assert pushed.returncode == 0, pushed.stderr
    assert "moved slots 2000-5460" in pushed.stderr, pushed.stderr
    reader = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", ports[1])])
    lost = [key for key, n in acked.items() if reader.get(key) != str(n).encode()]
    assert not lost, f"{len(lost)} acknowledged writes lost, e.g. {lost[:3]}"
    print(f"moved under load: {len(acked)} keys, none lost")
    cluster.close()
    reader.close()


if __name__ == "__main__":
    ports = [int(p) for p in sys.argv[1:4]]
    check_cluster(ports)
    check_standalone(int(sys.argv[4]))
    check_move_under_load(ports, sys.argv[5], sys.argv[6])
    print("cluster: every check passed")

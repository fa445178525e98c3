#!/usr/bin/env python3
"""Writes the seed corpora under fuzz/corpus/ (run from the repository root).

Seeds are valid inputs taken from the examples, the tests and DESIGN.md, plus a few edge
cases each. Inputs that once failed a fuzzer are committed by hand as corpus/<target>/regress-*
and are not written here. Binary seeds (checkpoint files, handshake messages) are built here
with the same layout the C++ writes, so they stay meaningful when read.
"""
import gzip
import hashlib
import hmac
import json
import os
import struct

ROOT = os.path.join("fuzz", "corpus")


def write(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def read(path):
    with open(path, "rb") as f:
        return f.read()


# --- TF_CONFIG ---------------------------------------------------------------------------
tf = "tf_config_fuzzer"
write(tf, "design", json.dumps({
    "cluster": {"chief": ["host0:2222"], "worker": ["host1:2222", "host2:2222"],
                "ps": ["host3:2222"], "evaluator": ["host4:2222"]},
    "task": {"type": "worker", "index": 1}, "rpc_layer": "grpc"}))
write(tf, "no_chief", '{"cluster":{"worker":["a:1","b:2"]},"task":{"type":"worker","index":0}}')
write(tf, "ipv6", '{"cluster":{"worker":["[::1]:2222","[fe80::1]:1"]},"task":{"type":"worker","index":1}}')
write(tf, "evaluator_absent",
      '{"cluster":{"worker":["a:1"]},"task":{"type":"evaluator","index":0}}')
write(tf, "index_out_of_range", '{"cluster":{"worker":["a:1"]},"task":{"type":"worker","index":5}}')
write(tf, "duplicate_address", '{"cluster":{"worker":["a:1","a:1"]},"task":{"type":"worker","index":0}}')
write(tf, "two_chiefs", '{"cluster":{"chief":["a:1","b:1"]},"task":{"type":"chief","index":0}}')
write(tf, "bad_port", '{"cluster":{"worker":["a:99999","b:-1","c:"]},"task":{"type":"worker","index":0}}')
write(tf, "wrong_types", '{"cluster":{"worker":"a:1"},"task":{"type":3,"index":"0"},"rpc_layer":[]}')
write(tf, "huge_index", '{"cluster":{"worker":["a:1"]},"task":{"type":"worker","index":1e300}}')
write(tf, "negative_index", '{"cluster":{"worker":["a:1"]},"task":{"type":"worker","index":-2147483649}}')
write(tf, "not_json", '{"cluster": {"worker": ["a:1"')
write(tf, "empty", "")

# --- JobSpec JSON -> validation -> model builder ------------------------------------------
js = "job_spec_fuzzer"
job = json.loads(read("examples/jobs/digits_mlp.json"))
write(js, "digits_mlp", read("examples/jobs/digits_mlp.json"))
cnn = dict(job, model=json.loads(read("examples/digits_cnn.json")), name="digits-cnn")
write(js, "digits_cnn", json.dumps(cnn))
write(js, "mirrored_steps", json.dumps(dict(job, strategy="MIRRORED", epochs=0, steps=100)))
mse = dict(job)
mse["model"] = {"inputShape": [4], "loss": "MSE", "f64": True,
                "layers": [{"dense": {"units": 3}}, {"tanh": {}}, {"dropout": {"rate": 0.5}},
                           {"sigmoid": {}}, {"dense": {"units": 1}}, {"softmax": {}}]}
write(js, "mse", json.dumps(mse))
write(js, "negative_units", json.dumps(dict(job, model={
    "loss": "SPARSE_CATEGORICAL_CROSSENTROPY", "inputShape": [64], "layers": [{"dense": {"units": -5}}]})))
write(js, "huge_units", json.dumps(dict(job, model={
    "loss": "SPARSE_CATEGORICAL_CROSSENTROPY", "inputShape": [9223372036854775807], "layers": [{"dense": {"units": 4611686018427387904}}]})))
write(js, "reshape_minus_one", json.dumps(dict(job, model={
    "loss": "SPARSE_CATEGORICAL_CROSSENTROPY", "inputShape": [64], "layers": [{"reshape": {"shape": [-1, -1]}}, {"flatten": {}}]})))
write(js, "conv_big_kernel", json.dumps(dict(job, model={
    "loss": "SPARSE_CATEGORICAL_CROSSENTROPY", "inputShape": [2, 2, 1], "layers": [{"conv2d": {"filters": 1, "kernelSize": [5], "strides": [0]}},
                                        {"maxpool2d": {"poolSize": [0, 3]}}]})))
write(js, "unknown_field", '{"name":"x","frobnicate":1}')
write(js, "batch_zero", json.dumps(dict(job, globalBatchSize=0, epochs=-1)))
write(js, "empty_object", "{}")

# --- model spec JSON ----------------------------------------------------------------------
ms = "model_spec_fuzzer"
write(ms, "digits_mlp", read("examples/digits_mlp.json"))
write(ms, "digits_cnn", read("examples/digits_cnn.json"))
write(ms, "unknown_layer", '{"inputShape":[4],"layers":[{"lstm":{}}]}')
write(ms, "empty_layers", '{"inputShape":[],"layers":[]}')
write(ms, "conv_strides", '{"inputShape":[8,8,1],"loss":"MSE","layers":[{"conv2d":{"filters":2,"kernelSize":[3,3],'
                          '"strides":[2,2],"padding":"SAME"}},{"maxpool2d":{"poolSize":[3],"strides":[1]}},'
                          '{"flatten":{}},{"dense":{"units":2}}]}')

write(ms, "huge_conv_channels", '{"inputShape":[3,3,4611686018427387904],"loss":"SPARSE_CATEGORICAL_CROSSENTROPY","layers":[{"conv2d":'
                                '{"filters":3,"kernelSize":[3]}},{"flatten":{}},{"dense":{"units":2}}]}')
write(ms, "huge_flatten", '{"inputShape":[4294967296,4294967296,4],"loss":"SPARSE_CATEGORICAL_CROSSENTROPY","layers":[{"flatten":{}},'
                          '{"dense":{"units":2}}]}')
write(ms, "huge_reshape", '{"inputShape":[9223372036854775807,2],"loss":"SPARSE_CATEGORICAL_CROSSENTROPY","layers":[{"reshape":{"shape":[-1]}},'
                          '{"maxpool2d":{"poolSize":[2147483647]}}]}')

# --- CSV: first byte = options (fuzz/csv_reader_fuzzer.cc) --------------------------------
csv = "csv_reader_fuzzer"
rows = gzip.decompress(read("examples/data/digits.csv.gz")).decode().splitlines()
write(csv, "digits_head", b"\x00" + ("\n".join(rows[:4]) + "\n").encode())
write(csv, "digits_head_gz", b"\x00" + gzip.compress(("\n".join(rows[:3]) + "\n").encode(), mtime=0))
write(csv, "header_float_label", b"\x03a,b,c\n1.5,2,0.25\n-1e3,  4 ,7\r\n\n")
write(csv, "semicolon_first_label", b"\x24" + b"1;2;3\n4;5;6\n")  # ";", label column 0
write(csv, "shape_2x2", b"\x40" + b"1,2,3,4,0\n5,6,7,8,1\n")
write(csv, "ragged", b"\x00" + b"1,2,3\n4,5\n")
write(csv, "not_numbers", b"\x00" + b"1,x,3\nnan,inf,1e999\n")
write(csv, "label_not_integer", b"\x00" + b"1,2,3.5\n")
write(csv, "label_only", b"\x00" + b"7\n8\n")
write(csv, "long_line", b"\x00" + b",".join([b"1"] * 3000) + b"\n")
write(csv, "truncated_gz", b"\x00" + gzip.compress(b"1,2,3\n" * 50, mtime=0)[:40])


# --- checkpoint: first byte odd = payload to frame, even = whole file ----------------------
def varint(n):
    n &= (1 << 64) - 1
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(num, wire, payload):
    key = varint((num << 3) | wire)
    if wire == 0:
        return key + varint(payload)
    return key + varint(len(payload)) + payload


def tensor(dtype, dims, content):
    shape = b"".join(field(1, 0, d) for d in dims)
    return field(1, 0, dtype) + field(2, 2, shape) + field(3, 2, content)


def named(name, t):
    return field(1, 2, name.encode()) + field(2, 2, t)


def checkpoint(variables, slots=(), step=5):
    out = field(1, 2, b"job-1") + field(2, 0, 1) + field(3, 0, step)
    out += b"".join(field(4, 2, v) for v in variables)
    out += b"".join(field(5, 2, s) for s in slots)
    out += field(6, 2, field(1, 2, b"iter") + field(2, 0, 3) + field(3, 0, 96))
    return out + field(7, 0, 1700000000000000)


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def mask(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame(payload, version=1):
    head = struct.pack("<IIQI", 0x4B43534C, version, len(payload), mask(crc32c(payload)))
    return head + struct.pack("<I", mask(crc32c(head))) + payload


def payload_v2(meta, contents):
    """Format version 2: the metadata message (no contents), the tensor table, the contents."""
    table = struct.pack("<Q", len(contents)) + b"".join(struct.pack("<Q", len(c)) for c in contents)
    return struct.pack("<Q", len(meta)) + meta + table + b"".join(contents)


ck = "checkpoint_fuzzer"
good = checkpoint([named("dense/kernel", tensor(1, [2, 3], struct.pack("<6f", *range(6)))),
                   named("dense/bias", tensor(1, [3], bytes(12)))],
                  [named("dense/kernel/m", tensor(2, [2, 3], bytes(48)))])
write(ck, "file_valid", b"\x00" + frame(good))
write(ck, "payload_valid", b"\x01" + good)
write(ck, "payload_scalar_i64", b"\x01" + checkpoint([named("s", tensor(6, [], struct.pack("<q", 9)))]))
write(ck, "payload_content_short", b"\x01" + checkpoint([named("w", tensor(1, [4], bytes(8)))]))
write(ck, "payload_negative_dim", b"\x01" + checkpoint([named("w", tensor(1, [-1, -1], b""))]))
write(ck, "payload_unknown_dtype", b"\x01" + checkpoint([named("w", tensor(99, [1], bytes(4)))]))
write(ck, "payload_empty", b"\x01")
write(ck, "payload_not_proto", b"\x01\xff\xff\xff\xff")
bad_crc = bytearray(frame(good))
bad_crc[-1] ^= 1
write(ck, "file_payload_crc", b"\x00" + bytes(bad_crc))
write(ck, "file_truncated", b"\x00" + frame(good)[:30])
write(ck, "file_header_only", b"\x00" + frame(b""))
v2_meta = field(1, 2, b"j") + field(3, 0, 3) + field(4, 2, named("w", field(1, 0, 1) + field(2, 2, field(1, 0, 2))))
write(ck, "file_valid_v2", b"\x00" + frame(payload_v2(v2_meta, [struct.pack("<2f", 1.5, -2.0)]), 2))

# --- Checkpoint broadcast framing: first byte = case (fuzz/blob_broadcast_fuzzer.cc) --------
bb = "blob_broadcast_fuzzer"
BLOB_MAGIC = int.from_bytes(b"LSBLOB01", "little")
BLOB_LABEL, BLOB_ROOT = b"the checkpoint of step 7 for jobs/j/0", 1


def blob_header(payload, length=None, root=BLOB_ROOT, magic=BLOB_MAGIC):
    if length is None:
        length = -1 if payload is None else len(payload)
    key = hmac.new(b"secret", b"lockstep blob broadcast key", hashlib.sha256).digest()
    msg = (b"lockstep-blob-v1|" + BLOB_LABEL + b"|" + str(root).encode() + b"|" +
           str(length).encode() + b"|" + (payload or b""))
    mac = hmac.new(key, msg, hashlib.sha256).digest()
    return struct.pack("<QqiIQ", magic, length, root, 0, 0) + mac


ckpt_bytes = bytes(range(256)) * 3
write(bb, "valid", b"\x00" + blob_header(ckpt_bytes) + ckpt_bytes)
write(bb, "valid_empty", b"\x00" + blob_header(b""))
write(bb, "end_marker", b"\x00" + blob_header(None))
write(bb, "huge_length", b"\x00" + blob_header(b"x", length=1 << 62) + b"x")
write(bb, "over_bound", b"\x00" + blob_header(b"y" * 4097) + b"y" * 4097)
write(bb, "negative_length", b"\x00" + blob_header(b"", length=-7))
write(bb, "other_root", b"\x00" + blob_header(b"abc", root=0) + b"abc")
write(bb, "wrong_magic", b"\x00" + blob_header(b"abc", magic=BLOB_MAGIC ^ 1) + b"abc")
write(bb, "tampered", b"\x00" + blob_header(b"abc") + b"abd")
write(bb, "short_header", b"\x00" + blob_header(b"abc")[:40])
write(bb, "flip_in_mac", b"\x01" + struct.pack("<H", 40) + ckpt_bytes)
write(bb, "flip_in_length", b"\x01" + struct.pack("<H", 9) + ckpt_bytes)
write(bb, "flip_in_payload", b"\x01" + struct.pack("<H", 300) + ckpt_bytes)


# --- TCP handshake: first byte = message (fuzz/tcp_handshake_fuzzer.cc) --------------------
hs = "tcp_handshake_fuzzer"
MAGIC = 0x4C4F434B53544550
SECRET, GROUP = b"secret", b"jobs/j/0"
nonce_a, nonce_c = b"\x0a" * 32, b"\x0c" * 32


def connector_mac(rank, world, a=nonce_a, c=nonce_c, secret=SECRET, group=GROUP):
    msg = b"connect|" + group + b"|" + a + c + b"|" + str(rank).encode() + b"|" + str(world).encode()
    return hmac.new(secret, msg, hashlib.sha256).digest()


def proof(rank, world, **kw):
    return struct.pack("<Qii", MAGIC, rank, world) + nonce_c + connector_mac(rank, world, **kw)


write(hs, "hello_valid", b"\x00" + struct.pack("<QII", MAGIC, 1, 0) + nonce_a)
write(hs, "hello_wrong_version", b"\x00" + struct.pack("<QII", MAGIC, 2, 0) + nonce_a)
write(hs, "hello_http", b"\x00" + b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + b" " * 21)
write(hs, "hello_short", b"\x00" + struct.pack("<Q", MAGIC))
write(hs, "proof_valid", b"\x01" + proof(2, 4))
write(hs, "proof_rank_out_of_range", b"\x01" + proof(4, 4))
write(hs, "proof_wrong_secret", b"\x01" + proof(2, 4, secret=b"other"))
write(hs, "proof_other_group", b"\x01" + proof(2, 4, group=b"jobs/k/0"))
write(hs, "signed_valid", b"\x02" + struct.pack("<ii", 3, 4) + nonce_c)
write(hs, "signed_negative_rank", b"\x02" + struct.pack("<ii", -1, 4) + nonce_c)
write(hs, "signed_other_world", b"\x02" + struct.pack("<ii", 0, 2**31 - 1) + nonce_c)
accept = hmac.new(SECRET, b"accept|" + GROUP + b"|" + b"\x0c" * 32 + nonce_a + b"|2",
                  hashlib.sha256).digest()
write(hs, "answer_valid", b"\x03" + accept)
write(hs, "answer_short", b"\x03" + accept[:16])

# --- shm negotiation ----------------------------------------------------------------------
sh = "shm_negotiation_fuzzer"
write(sh, "advert", "/lockstep-00ff00ff00ff00ff-r1-p4242-0badf00d 8392704")
write(sh, "advert_too_small", "/seg 4095")
write(sh, "advert_overflow", "/seg 184467440737095516160")
write(sh, "caps_off", "cma=0;direct=off")
write(sh, "caps_on", "cma=4096;direct=65536")
write(sh, "caps_repeated_keys", "direct=1;cma=;cma=2;;direct")
write(sh, "empty", "")

# --- heartbeat diagnostics (HeartbeatRequest.diagnostics) -----------------------------------
# The fuzzer's one job is job-000001, attempt 1, run by worker/0; the first byte's bit 0 makes
# worker/1 (which runs nothing) the sender, bit 1 moves the clock on.
hb = "heartbeat_diagnostics_fuzzer"


def log_line(seq, text):
    return field(1, 0, seq) + field(2, 0, 1_700_000_000_000_000) + field(3, 2, text.encode())


def record(job_id, attempt, entered=7, kind=b"all-reduce"):
    collective = field(1, 0, entered) + field(2, 2, kind) + field(3, 0, 1024) + field(4, 0, 1)
    return (field(1, 2, job_id.encode()) + field(2, 0, attempt) + field(4, 0, 1) +
            field(5, 0, 2) + field(8, 0, entered) + field(10, 2, collective))


def diagnostics(job_id, attempt, lines=(), rec=True, finished=False, first_seq=1):
    out = field(1, 2, job_id.encode()) + field(2, 0, attempt)
    if rec:
        out += field(3, 2, record(job_id, attempt))
    for i, text in enumerate(lines):
        out += field(4, 2, log_line(first_seq + i, text))
    if finished:
        out += field(5, 0, 1)
    return field(7, 2, out)


write(hb, "own_attempt", b"\x00" + diagnostics("job-000001", 1, ["step 1 loss 2.3", "step 2"]))
write(hb, "own_attempt_repeated_seq",
      b"\x02" + diagnostics("job-000001", 1, ["again", "new"], first_seq=2))
write(hb, "own_attempt_finished", b"\x00" + diagnostics("job-000001", 1, ["bye"], finished=True,
                                                        first_seq=10))
write(hb, "stranger_forges_lines", b"\x01" + diagnostics(
    "job-000001", 1, ["\x1b[2J\x1b[Hall good", "\rloss 0.0"]))
write(hb, "other_attempt", b"\x00" + diagnostics("job-000001", 9, ["from attempt 9"]))
write(hb, "made_up_jobs", b"\x01" + b"".join(
    diagnostics("job-%06d" % (900000 + i), i, ["x"]) for i in range(20)))
write(hb, "empty_job_id", b"\x00" + diagnostics("", 1, ["no job"]))
write(hb, "long_line", b"\x00" + diagnostics("job-000001", 1, ["y" * 300], rec=False,
                                             first_seq=100))
write(hb, "many_lines", b"\x00" + diagnostics(
    "job-000001", 1, ["line %d" % i for i in range(100)], rec=False, first_seq=200))
write(hb, "big_record", b"\x00" + field(7, 2, field(1, 2, b"job-000001") + field(2, 0, 1) +
                                        field(3, 2, record("job-000001", 1, kind=b"k" * 5000))))
write(hb, "not_proto", b"\x00\xff\xff\xff\xff")
write(hb, "empty", b"\x00")

#!/usr/bin/env python3
"""gen_command_table.py [redis-server]: writes samples/kv/command_table.cpp, uring-kv's COMMAND table.

Run at development time, when uring-kv gains a command or the Redis it answers as changes: starts
redis-server on a free loopback port (no persistence, its own temp dir), asks COMMAND INFO and COMMAND DOCS
(RESP3) for every command commands.cpp lists, and writes each entry serialised as redis-server sent it,
with what COMMAND LIST and GETKEYS need (full names, ACL categories, arity, key specs); a container's
entry leaves out its subcommands' entries, which follow it. The build does not
need redis-server. The RESP2 form is derived at run time (maps and sets become arrays): this script checks,
entry by entry, that the derived form equals what redis-server sends in RESP2.
"""
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def encode(args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a.encode() if isinstance(a, str) else a
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""

    def _fill(self):
        d = self.s.recv(1 << 20)
        if not d:
            raise EOFError
        self.buf += d

    def _parse(self, at):
        """(value, end): maps as ("map", [[k, v]...]), sets as ("set", [...]), each element with its raw
        bytes in raw_of (by id)."""
        while self.buf.find(b"\r\n", at) < 0:
            self._fill()
        end = self.buf.find(b"\r\n", at)
        kind, body, start, at = self.buf[at:at + 1], self.buf[at + 1:end], at, end + 2
        if kind in (b"+", b"-"):
            return (kind.decode(), body.decode()), at
        if kind == b":":
            return int(body), at
        if kind == b"_":
            return None, at
        if kind == b"$":
            n = int(body)
            if n < 0:
                return None, at
            while len(self.buf) < at + n + 2:
                self._fill()
            return self.buf[at:at + n], at + n + 2
        if kind in (b"*", b"~", b"%"):
            n = int(body)
            if n < 0:
                return None, at
            items = []
            for _ in range(n * (2 if kind == b"%" else 1)):
                v, at = self._parse(at)
                items.append(v)
            if kind == b"%":
                return ("map", [items[i:i + 2] for i in range(0, len(items), 2)]), at
            return (("set", items) if kind == b"~" else items), at
        raise ValueError("not RESP: %r" % self.buf[start:start + 60])

    def reply(self, args):
        """(raw bytes, value) of one command's reply."""
        self.s.sendall(encode(args))
        value, at = self._parse(0)
        raw, self.buf = self.buf[:at], self.buf[at:]
        return raw, value

    def elements(self, raw):
        """The raw bytes of each element of the aggregate `raw` (a map counts keys and values)."""
        self.buf, out = raw, []
        end = self.buf.find(b"\r\n")
        at = end + 2
        n = int(raw[1:end]) * (2 if raw[:1] == b"%" else 1)
        for _ in range(n):
            _, nxt = self._parse(at)
            out.append(raw[at:nxt])
            at = nxt
        self.buf = b""
        return out


def to_resp2(raw):
    """RESP3 to RESP2 as Redis writes it: a map of n pairs is an array of 2n, a set an array (walked line by
    line, a bulk string's bytes skipped, as command_info.cpp does)."""
    out, at = b"", 0
    while at < len(raw):
        end = raw.index(b"\r\n", at)
        kind, body = raw[at:at + 1], raw[at + 1:end]
        if kind == b"%":
            out += b"*%d\r\n" % (2 * int(body))
        elif kind == b"~":
            out += b"*" + body + b"\r\n"
        elif kind == b"$" and int(body) >= 0:
            end += 2 + int(body)
            out += raw[at:end + 2]
        else:
            out += raw[at:end + 2]
        at = end + 2
    return out


def implemented():
    """The names commands.cpp's table lists, lower case, in its order."""
    with open(os.path.join(HERE, "commands.cpp")) as f:
        text = f.read()
    table = text[text.index("constexpr spec commands[]"):]
    table = table[:table.index("};")]
    return [n.lower() for n in re.findall(r'\{"([A-Z]+)",', table)]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cstring(b):
    """A C++ string literal of bytes `b`, split after each CRLF (within ~100 columns)."""
    parts, line = [], ""
    for ch in b:
        piece = {13: "\\r", 10: "\\n", 34: '\\"', 92: "\\\\"}.get(ch)
        if piece is None:
            piece = chr(ch) if 32 <= ch < 127 else "\\x%02x\"\"" % ch
        line += piece
        if ch == 10 and len(line) > 60:
            parts.append('"%s"' % line)
            line = ""
    if line or not parts:
        parts.append('"%s"' % line)
    return "\n        ".join(parts)


def items(v):
    """The elements of an array or a set."""
    return v[1] if isinstance(v, tuple) else v


def field(mapping, name):
    for k, v in mapping[1]:
        if k == name.encode():
            return v
    return None


def key_specs(info):
    """(begin index, lastkey, keystep, limit, flags RESP3) of each key spec of a COMMAND INFO entry;
    uring-kv's commands all take their keys by index and range."""
    specs = []
    for spec in items(info[8]):
        bs, fk = field(spec, "begin_search"), field(spec, "find_keys")
        if field(bs, "type") != b"index" or field(fk, "type") != b"range":
            sys.exit("%s: a key spec that is not index+range" % info[0].decode())
        flags = items(field(spec, "flags"))
        flags_raw = b"~%d\r\n" % len(flags) + b"".join(b"+%s\r\n" % f[1].encode() for f in flags)
        bsi, fkr = field(field(bs, "spec"), "index"), field(fk, "spec")
        specs.append((bsi, field(fkr, "lastkey"), field(fkr, "keystep"), field(fkr, "limit"), flags_raw))
    return specs


def bulk(b):
    return b"$%d\r\n%s\r\n" % (len(b), b)


def strip_tail(raw, pieces):
    """`raw` without its end, which must be `pieces` in any order (Redis lists subcommands in its hash
    table's order, which changes between calls); None if it is not."""
    tail = raw[len(raw) - sum(len(p) for p in pieces):]
    for p in sorted(pieces, key=len, reverse=True):
        at = tail.find(p)
        if at < 0:
            return None
        tail = tail[:at] + tail[at + len(p):]
    return raw[:len(raw) - sum(len(p) for p in pieces)] if not tail else None


def without_subcommands(name, info_raw, docs_raw, subs):
    """A container's INFO and DOCS without its subcommands' entries, which end both (INFO's last element is
    the array of their INFO entries, DOCS's last field the map of their DOCS): command_info.cpp appends the
    subcommands' own rows there, in the table's order. `subs` is [(name, info_raw, docs_raw)]."""
    info = strip_tail(info_raw, [i for _, i, _ in subs])
    docs = strip_tail(docs_raw, [bulk(n.encode()) + d for n, _, d in subs])
    if info is None or docs is None:
        sys.exit("%s: its subcommands' entries do not end its INFO and DOCS" % name)
    return info, docs


def fetch(conn2, conn3, name):
    """(parsed INFO entry, raw RESP3 INFO entry, raw RESP3 DOCS value) of `name`, each checked against
    redis-server's RESP2."""
    raw3, reply = conn3.reply(["COMMAND", "INFO", name])
    raw2, _ = conn2.reply(["COMMAND", "INFO", name])
    info = reply[0]
    if info is None:
        sys.exit("redis-server does not know %s" % name)
    info_raw = conn3.elements(raw3)[0]
    if b"*1\r\n" + to_resp2(info_raw) != raw2:
        sys.exit("%s: COMMAND INFO's RESP2 is not its RESP3 with maps and sets as arrays" % name)
    docs3, _ = conn3.reply(["COMMAND", "DOCS", name])
    docs2, _ = conn2.reply(["COMMAND", "DOCS", name])
    if to_resp2(docs3) != docs2:
        sys.exit("%s: COMMAND DOCS's RESP2 is not its RESP3 with maps and sets as arrays" % name)
    return info, info_raw, conn3.elements(docs3)[1]


def row(name, sub, info, info_raw, docs_raw):
    """The C++ row of `name` (a command, or container|sub) with these INFO and DOCS bytes."""
    acl = " ".join(c[1] for c in items(info[6]))
    flags = {f[1] for f in items(info[2])}
    specs = key_specs(info)
    spec_rows = ", ".join("{%d, %d, %d, %d, %s}" % (s[0], s[1], s[2], s[3], cstring(s[4])) for s in specs)
    return "    {%s, %d, %s, %s, %s, %d, {%s},\n        %s,\n        %s}" % (
        cstring(name.encode()), info[1], cstring(acl.encode()), "true" if sub else "false",
        "true" if "no_mandatory_keys" in flags else "false", len(specs), spec_rows,
        cstring(info_raw), cstring(docs_raw))


def main():
    server = sys.argv[1] if len(sys.argv) > 1 else shutil.which("redis-server")
    tmp = tempfile.mkdtemp(prefix="gen_command_table_")
    port = free_port()
    proc = subprocess.Popen([server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", tmp], stdout=subprocess.DEVNULL)
    try:
        deadline = time.time() + 20
        while True:
            try:
                conn2, conn3 = Conn(port), Conn(port)
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.05)
        conn3.reply(["HELLO", "3"])
        version = conn2.reply(["INFO", "server"])[1].decode()
        version = re.search(r"redis_version:(\S+)", version).group(1)
        rows, max_specs = [], 0
        for name in implemented():
            info, info_raw, docs_raw = fetch(conn2, conn3, name)
            # By name: Redis lists them in its hash table's order, which changes between calls.
            names = sorted(sub[0].decode() for sub in items(info[9]))
            subs = [(n,) + fetch(conn2, conn3, n) for n in names]
            if subs:
                info_raw, docs_raw = without_subcommands(name, info_raw, docs_raw,
                                                         [(n, i, d) for n, _, i, d in subs])
            rows.append(row(name, False, info, info_raw, docs_raw))
            rows += [row(n, True, i, ir, dr) for n, i, ir, dr in subs]
            max_specs = max(max_specs, len(items(info[8])))
        help_raw = conn3.reply(["COMMAND", "HELP"])[0]
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    out = os.path.join(HERE, "command_table.cpp")
    with open(out, "w") as f:
        f.write("// samples/kv/command_table.cpp — generated by gen_command_table.py from redis-server %s: do not edit.\n"
                "// COMMAND INFO and COMMAND DOCS of every command uring-kv implements, as Redis serialises them in RESP3.\n"
                '#include "command_table.hpp"\n\nnamespace kv {\n\n' % version)
        f.write("// clang-format off\nconst command_entry command_entries[] = {\n")
        f.write(",\n".join(rows))
        f.write("\n};\n\nconst std::span<const command_entry> command_table{command_entries};\n\n")
        f.write("const std::string_view command_help =\n        %s;\n// clang-format on\n\n}  // namespace kv\n"
                % cstring(help_raw))
    print("wrote %s: %d entries (max %d key specs)" % (out, len(rows), max_specs))


if __name__ == "__main__":
    main()

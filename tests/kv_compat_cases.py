"""kv_compat_cases.py: the command sequences tests/kv_compat_test.py sends to redis-server and uring-kv.

cases() yields (label, sequence) pairs, hand-written: every command uring-kv supports, with its error cases.
random_sequence(rng, n) makes a seeded random sequence of string, key and expiry commands over six keys.
A step is an argument list (sent as multibulk), bytes (an inline command), ("closed",) (both servers must
have closed the connection) or ("scan", [options]) (a whole SCAN walk, compared as a set of keys).
"""
import time


def cases():
    """(label, sequence) pairs; each sequence starts from empty databases."""
    big = 2 ** 63 - 1
    yield "connection", [
        ["PING"], ["PING", "hello"], ["PING", "a", "b"], ["ECHO", "hi there"], ["ECHO"], ["ECHO", "a", "b"],
        ["ping"], ["NOSUCH", "a", "b"], ["NOSUCH"], ["nosuch", "x" * 200, "y" * 10], [""],
        ["SELECT", "0"], ["SELECT", "16"], ["SELECT", "-1"], ["SELECT", "x"], ["SELECT", "01"],
        ["SELECT"], ["SELECT", "1", "2"],
        ["CLIENT", "SETNAME", "conn-1"], ["CLIENT", "SETNAME", "a b"], ["CLIENT", "SETNAME", "a\nb"],
        ["CLIENT", "SETNAME"], ["CLIENT", "SETNAME", "a", "b"], ["CLIENT", "NOSUCH"], ["CLIENT"],
        ["CONFIG", "GET", "save"], ["CONFIG", "GET", "appendonly"], ["CONFIG", "GET", "nosuch"],
        ["CONFIG", "NOSUCH"], ["CONFIG"],
        ["INFO"], ["INFO", "server"], ["COMMAND", "COUNT"],
        ["QUIT"], ("closed",),
    ]
    yield "hello", [
        ["HELLO"], ["HELLO", "1"], ["HELLO", "4"], ["HELLO", "x"], ["HELLO", "02"], ["HELLO", "3", "foo"],
        ["HELLO", "3", "AUTH", "a"], ["HELLO", "3", "SETNAME"], ["HELLO", "2", "AUTH", "default", "any"],
        ["HELLO", "2", "AUTH", "bob", "any"], ["HELLO", "3", "SETNAME", "a", "b"], ["CLIENT", "GETNAME"],
        ["HELLO", "3", "SETNAME", "a b"], ["HELLO", "3", "setname", "named", "auth", "default", "x"],
        ["CLIENT", "GETNAME"], ["GET", "nosuch"], ["MGET", "a", "nosuch"], ["SET", "a", "1", "NX"],
        ["SET", "a", "2", "NX"], ["SET", "b", "1", "XX", "GET"], ["CONFIG", "GET", "save"],
        ["CONFIG", "GET", "nosuch"], ["WATCH", "a"], ("other", ["SET", "a", "3"]), ["MULTI"], ["GET", "a"],
        ["EXEC"], ["MULTI"], ["HELLO", "2"], ["GET", "nosuch"], ["EXEC"], ["GET", "nosuch"],
        ["CONFIG", "GET", "save"], ["HELLO", "3"], ["RANDOMKEY"], ["GETDEL", "nosuch"], ["GETEX", "nosuch"],
    ]
    yield "command", [
        ["COMMAND"], ["COMMAND", "COUNT"], ["COMMAND", "COUNT", "x"], ["COMMAND", "NOSUCH"], ["COMMAND", "x" * 200],
        ["command", "info", "GET", "nosuch", "set", "config|get", "CONFIG|nosuch", "get|x", "client|SETNAME"],
        ["COMMAND", "INFO"], ["COMMAND", "INFO", ""], ["COMMAND", "DOCS", "get", "nosuch", "MSET", "client|kill"],
        ["COMMAND", "DOCS"], ["COMMAND", "DOCS", "nosuch"], ["COMMAND", "LIST"],
        ["COMMAND", "LIST", "FILTERBY", "PATTERN", "GET*"], ["COMMAND", "LIST", "FILTERBY", "pattern", "config|*"],
        ["COMMAND", "LIST", "FILTERBY", "PATTERN", "*e?[a-c]*"], ["COMMAND", "LIST", "FILTERBY", "PATTERN", "nosuch"],
        ["COMMAND", "LIST", "FILTERBY", "ACLCAT", "string"], ["COMMAND", "LIST", "filterby", "aclcat", "KEYSPACE"],
        ["COMMAND", "LIST", "FILTERBY", "ACLCAT", "nosuch"], ["COMMAND", "LIST", "FILTERBY", "ACLCAT", "@read"],
        ["COMMAND", "LIST", "FILTERBY", "MODULE", "x"], ["COMMAND", "LIST", "FILTERBY"], ["COMMAND", "LIST", "x"],
        ["COMMAND", "LIST", "FILTERBY", "nosuch", "x"], ["COMMAND", "LIST", "FILTERBY", "PATTERN", "a", "b"],
        ["COMMAND", "GETKEYS", "get", "a"], ["COMMAND", "GETKEYS", "MSET", "a", "1", "b", "2"],
        ["COMMAND", "GETKEYS", "mset", "a", "1", "b"], ["COMMAND", "GETKEYS", "mset", "a"],
        ["COMMAND", "GETKEYS", "set", "a", "b", "EX", "1"], ["COMMAND", "GETKEYS", "copy", "a", "b", "DB", "1"],
        ["COMMAND", "GETKEYS", "rename", "a", "b"], ["COMMAND", "GETKEYS", "scan", "0"],
        ["COMMAND", "GETKEYS", "config", "get", "x"], ["COMMAND", "GETKEYS", "client", "nosuch"],
        ["COMMAND", "GETKEYS", "nosuch", "a"], ["COMMAND", "GETKEYS", "get"], ["COMMAND", "GETKEYS", "get", "a", "b"],
        ["COMMAND", "GETKEYS", "del", "a", "b", "c"], ["COMMAND", "GETKEYS", "watch", "a", "b"],
        ["COMMAND", "GETKEYS", "msetnx", "a", "1"], ["COMMAND", "GETKEYS", "COMMAND", "GETKEYS", "get", "a"],
        ["COMMAND", "GETKEYS", "CONFIG", "x"], ["COMMAND", "GETKEYS", "client", "kill", "x"],
        ["COMMAND", "GETKEYSANDFLAGS", "set", "a", "b", "GET"], ["COMMAND", "GETKEYSANDFLAGS", "set", "a", "b"],
        ["COMMAND", "GETKEYSANDFLAGS", "copy", "a", "b"], ["COMMAND", "GETKEYSANDFLAGS", "mget", "a", "b"],
        ["COMMAND", "GETKEYSANDFLAGS", "getex", "a", "PERSIST"], ["COMMAND", "GETKEYSANDFLAGS", "ping", "a"],
        ["COMMAND", "HELP"], ["COMMAND", "HELP", "x"], ["COMMAND", "help"],
        ["MULTI"], ["COMMAND", "GETKEYS", "get", "a"], ["COMMAND", "INFO", "get"], ["EXEC"],
    ]
    yield "config", [
        ["CONFIG", "SET", "proto-max-bulk-len", "2mb"], ["CONFIG", "GET", "proto-max-bulk-len"],
        ["CONFIG", "SET", "Proto-Max-Bulk-Len", "3000000", "client-query-buffer-limit", "4MB"],
        ["CONFIG", "GET", "proto-max-bulk-len"], ["CONFIG", "GET", "client-query-buffer-limit"],
        ["CONFIG", "SET", "nosuch", "1"], ["CONFIG", "SET", "proto-max-bulk-len", "x", "nosuch", "1"],
        ["CONFIG", "SET", "proto-max-bulk-len", "1mb", "PROTO-MAX-BULK-LEN", "2mb"],
        ["CONFIG", "SET", "PROTO-max-bulk-len", "x"], ["CONFIG", "SET", "proto-max-bulk-len", "10"],
        ["CONFIG", "SET", "proto-max-bulk-len", "99999999999999999999"],
        ["CONFIG", "SET", "client-query-buffer-limit", "1048575"], ["CONFIG", "SET", "client-query-buffer-limit", "1kb"],
        ["CONFIG", "SET", "proto-max-bulk-len", "5mb", "client-query-buffer-limit", "x"],
        ["CONFIG", "GET", "proto-max-bulk-len"], ["CONFIG", "SET", "proto-max-bulk-len"],
        ["CONFIG", "SET", "proto-max-bulk-len", "1mb", "x"], ["CONFIG", "SET"],
        ["CONFIG", "SET", "appendonly", "no"], ["CONFIG", "SET", "APPENDONLY", "NO"],
        ["CONFIG", "SET", "appendonly", "maybe"], ["CONFIG", "SET", "save", ""], ["CONFIG", "SET", "save", "3600"],
        ["CONFIG", "SET", "save", "-1 1"], ["CONFIG", "SET", "save", "1 x"], ["CONFIG", "SET", "save", " "],
        ["CONFIG", "SET", "appendonly", "no", "save", ""], ["CONFIG", "GET", "save"], ["CONFIG", "GET", "APPENDONLY"],
        ["CONFIG", "SET", "appendonly", "no", "nosuch", ""], ["CONFIG", "SET", "save", "", "save", ""],
        ["CONFIG", "RESETSTAT"], ["CONFIG", "RESETSTAT", "x"], ["config", "resetstat"],
        ["CONFIG", "SET", "proto-max-bulk-len", "512mb", "client-query-buffer-limit", "1gb"],
        ["CONFIG", "GET", "*bulk*"], ["CONFIG", "GET", "*BULK-len"], ["CONFIG", "GET", "client-query-buf?er-[k-m]imit"],
        ["CONFIG", "GET", "*bulk*", "proto-max-bulk-len"], ["CONFIG", "GET", "client-query-buffer-limit"],
    ]
    yield "auth_without_password", [
        ["AUTH", "x"], ["AUTH", "default", "x"], ["AUTH", "nobody", "x"], ["AUTH"], ["AUTH", "a", "b", "c"],
        ["auth", "default", ""], ["PING"],
    ]
    yield "client", [
        ["CLIENT", "KILL", "ID", "x"], ["CLIENT", "KILL", "ID", "0"], ["CLIENT", "KILL", "ID", "999999"],
        ["CLIENT", "KILL", "ID", "999999", "ID", "999998"], ["CLIENT", "KILL"], ["CLIENT", "KILL", "ID"],
        ["CLIENT", "KILL", "1.2.3.4:5"], ["CLIENT", "KILL", "ID", "999999", "SKIPME", "x"],
        ["CLIENT", "KILL", "TYPE", "master"], ["CLIENT", "KILL", "TYPE", "x"], ["CLIENT", "KILL", "USER", "nobody"],
        ["CLIENT", "KILL", "BOGUS", "1"], ["CLIENT", "KILL", "ADDR", "1.2.3.4:5", "SKIPME", "no"],
        ["CLIENT", "LIST", "x"], ["CLIENT", "LIST", "TYPE"], ["CLIENT", "LIST", "TYPE", "x"],
        ["CLIENT", "LIST", "TYPE", "master"], ["CLIENT", "LIST", "TYPE", "pubsub"], ["CLIENT", "LIST", "ID"],
        ["CLIENT", "LIST", "ID", "x"], ["CLIENT", "LIST", "ID", "999999", "999998"], ["CLIENT", "INFO", "x"],
        ["CLIENT", "NO-EVICT"], ["CLIENT", "NO-EVICT", "maybe"], ["CLIENT", "NO-EVICT", "on"],
        ["CLIENT", "NO-EVICT", "OFF"], ["CLIENT", "NO-TOUCH", "on"], ["CLIENT", "ID", "x"],
        ["CLIENT", "KILL", "ID", "999999", "TYPE", "normal", "USER", "default"],
    ]
    yield "strings", [
        ["SET", "k", "v"], ["GET", "k"], ["GET", "missing"], ["SET", "k", "v2", "XX"], ["SET", "k", "v3", "NX"],
        ["GET", "k"], ["SET", "new", "1", "XX"], ["SET", "k", "v", "NX", "XX"], ["SET", "k", "v", "XX", "NX"],
        ["SET", "k", "v", "EX"], ["SET", "k", "v", "EX", "x"], ["SET", "k", "v", "EX", "0"],
        ["SET", "k", "v", "EX", "-5"], ["SET", "k", "v", "PX", "01"], ["SET", "k", "v", "EX", "10", "PX", "10"],
        ["SET", "k", "v", "KEEPTTL", "EX", "10"], ["SET", "k", "v", "EX", "10", "KEEPTTL"],
        ["SET", "k", "v", "BOGUS"], ["SET", "k"], ["SET", "k", "v", "ex", "100"], ["TTL", "k"],
        ["SET", "k", "w", "KEEPTTL"], ["TTL", "k"], ["SET", "k", "w"], ["TTL", "k"],
        ["SET", "k", "v", "EX", str(big)], ["SET", "k", "v", "PX", str(big)],
        ["GET"], ["GET", "a", "b"],
    ]
    yield "integers", [
        ["SET", "n", "10"], ["INCR", "n"], ["DECR", "n"], ["INCRBY", "n", "5"], ["DECRBY", "n", "10"],
        ["INCRBY", "n", "-3"], ["INCR", "fresh"], ["DECR", "fresh2"],
        ["SET", "n", "01"], ["INCR", "n"], ["SET", "n", "-0"], ["INCR", "n"], ["SET", "n", "+1"], ["INCR", "n"],
        ["SET", "n", " 1"], ["INCR", "n"], ["SET", "n", "1 "], ["INCR", "n"], ["SET", "n", ""], ["INCR", "n"],
        ["SET", "n", "1.5"], ["INCR", "n"], ["SET", "n", "99999999999999999999"], ["INCR", "n"],
        ["SET", "n", "0"], ["INCRBY", "n", "01"], ["INCRBY", "n", "+1"], ["INCRBY", "n", "x"],
        ["INCRBY", "n", str(big)], ["INCR", "n"], ["SET", "n", str(-big - 1)], ["DECR", "n"],
        ["DECRBY", "n", str(-big - 1)], ["SET", "n", "5"], ["DECRBY", "n", str(-big - 1)],
        ["SET", "n", "-9223372036854775808"], ["GET", "n"], ["INCR", "n"], ["GET", "n"],
        ["INCR"], ["INCR", "a", "b"], ["INCRBY", "n"], ["DECRBY", "n", "1", "2"],
    ]
    yield "keys", [
        ["MSET", "a", "1", "b", "2", "c", "3"], ["MGET", "a", "b", "nosuch", "c", "a"],
        ["EXISTS", "a", "a", "nosuch", "b"], ["DEL", "a", "nosuch", "a"], ["EXISTS", "a"], ["DBSIZE"],
        ["MSET", "a"], ["MSET", "a", "1", "b"], ["MGET"], ["DEL"], ["EXISTS"], ["DBSIZE", "x"],
        ["FLUSHDB", "x"], ["FLUSHALL", "get"], ["FLUSHALL", "a", "b"], ["DBSIZE"],
        ["FLUSHALL", "ASYNC"], ["DBSIZE"], ["SET", "x", "1"], ["FLUSHDB", "sync"], ["DBSIZE"],
        ["SET", "x", "1"], ["FLUSHALL"], ["DBSIZE"],
    ]
    yield "expiry", [
        ["SET", "k", "v"], ["TTL", "k"], ["PTTL", "k"], ["TTL", "nosuch"], ["PTTL", "nosuch"],
        ["EXPIRE", "k", "100"], ["TTL", "k"], ["PTTL", "k"], ["PEXPIRE", "k", "200000"], ["TTL", "k"],
        ["EXPIRE", "nosuch", "10"], ["EXPIRE", "k", "x"], ["EXPIRE", "k", "01"], ["PEXPIRE", "k"],
        ["EXPIRE", "k"], ["EXPIRE", "k", str(big)], ["PEXPIRE", "k", str(big)],
        ["EXPIRE", "k", str(-big - 1)], ["EXPIRE", "k", "0"], ["GET", "k"], ["SET", "k", "v"],
        ["PEXPIRE", "k", "-1"], ["EXISTS", "k"], ["TTL"], ["PTTL", "a", "b"],
    ]
    yield "connection2", [
        ["CLIENT", "GETNAME"], ["CLIENT", "SETNAME", "me"], ["CLIENT", "GETNAME"], ["CLIENT", "SETNAME", ""],
        ["CLIENT", "GETNAME"], ["CLIENT", "GETNAME", "x"], ["CLIENT", "ID"], ["CLIENT", "ID", "x"],
        ["TIME"], ["TIME", "x"], ["client", "setname", "x y"],
    ]
    yield "databases", [
        ["SET", "k", "db0"], ["SELECT", "1"], ["GET", "k"], ["SET", "k", "db1"], ["SET", "only1", "x"],
        ["DBSIZE"], ["KEYS", "*"], ["SELECT", "15"], ["DBSIZE"], ["SELECT", "0"], ["GET", "k"], ["DBSIZE"],
        ["COPY", "k", "k", "DB", "2"], ["COPY", "k", "k"], ["COPY", "k", "k", "DB", "0"],
        ["COPY", "k", "k", "DB", "1"], ["COPY", "k", "k", "DB", "1", "REPLACE"], ["SELECT", "2"],
        ["GET", "k"], ["FLUSHDB"], ["DBSIZE"], ["SELECT", "1"], ["DBSIZE"], ["GET", "k"],
        ["COPY", "k", "z", "DB", "16"], ["COPY", "k", "z", "DB", "x"], ["COPY", "k", "z", "DB"],
        ["COPY", "k", "z", "BOGUS"], ["FLUSHALL"], ["DBSIZE"], ["SELECT", "0"], ["DBSIZE"],
    ]
    yield "strings2", [
        ["SET", "k", "hello"], ["GETSET", "k", "world"], ["GET", "k"], ["GETSET", "nosuch", "v"],
        ["GETSET", "k"], ["GETDEL", "k"], ["GETDEL", "k"], ["EXISTS", "k"], ["GETDEL"],
        ["SETNX", "a", "1"], ["SETNX", "a", "2"], ["GET", "a"], ["SETNX", "a"],
        ["SETEX", "e", "100", "v"], ["TTL", "e"], ["SETEX", "e", "0", "v"], ["SETEX", "e", "-1", "v"],
        ["SETEX", "e", "x", "v"], ["SETEX", "e", "100"], ["PSETEX", "p", "100000", "v"], ["PTTL", "p"],
        ["PSETEX", "p", "0", "v"], ["PSETEX", "p", "01", "v"], ["SETEX", "e", str(big), "v"],
        ["MSETNX", "m1", "1", "m2", "2"], ["MSETNX", "m2", "x", "m3", "3"], ["MGET", "m1", "m2", "m3"],
        ["MSETNX", "m1"], ["MSETNX", "m4", "4", "m5"],
        ["STRLEN", "m1"], ["STRLEN", "nosuch"], ["STRLEN"],
        ["APPEND", "s", "abc"], ["APPEND", "s", "def"], ["GET", "s"], ["APPEND", "s", ""], ["APPEND", "s"],
        ["SETRANGE", "s", "2", "XY"], ["GET", "s"], ["SETRANGE", "s", "10", "Z"], ["GET", "s"],
        ["SETRANGE", "s", "-1", "x"], ["SETRANGE", "s", "x", "y"], ["SETRANGE", "new", "3", "ab"], ["GET", "new"],
        ["SETRANGE", "none", "5", ""], ["EXISTS", "none"], ["SETRANGE", "s", "1", ""], ["SETRANGE", "s", "1"],
        ["SETRANGE", "s", "536870912", "x"], ["SETRANGE", "none", "536870912", ""],
        ["SET", "r", "Hello World"], ["GETRANGE", "r", "0", "4"], ["GETRANGE", "r", "-5", "-1"],
        ["GETRANGE", "r", "-1", "-5"], ["GETRANGE", "r", "5", "1"], ["GETRANGE", "r", "0", "100"],
        ["GETRANGE", "r", "-100", "2"], ["GETRANGE", "r", "20", "30"], ["GETRANGE", "nosuch", "0", "-1"],
        ["GETRANGE", "r", "x", "1"], ["GETRANGE", "r", "0", "y"], ["GETRANGE", "r", "0"], ["GETRANGE", "r", "-1", "-1"],
        ["SET", "r", ""], ["GETRANGE", "r", "0", "-1"],
    ]
    yield "floats", [
        ["SET", "f", "10.50"], ["INCRBYFLOAT", "f", "0.1"], ["INCRBYFLOAT", "f", "-5.0e3"],
        ["INCRBYFLOAT", "f", "2.0e2"], ["INCRBYFLOAT", "nf", "3"], ["INCRBYFLOAT", "nf", "x"],
        ["INCRBYFLOAT", "nf", " 1"], ["INCRBYFLOAT", "nf", "1 "], ["INCRBYFLOAT", "nf", ""],
        ["INCRBYFLOAT", "nf", "inf"], ["INCRBYFLOAT", "nf", "nan"], ["INCRBYFLOAT", "nf", "1e5000"],
        ["INCRBYFLOAT", "nf", "0x10"], ["INCRBYFLOAT", "nf", "-3"], ["SET", "s", "abc"], ["INCRBYFLOAT", "s", "1"],
        ["SET", "i", "5"], ["INCRBYFLOAT", "i", "0.25"], ["INCRBYFLOAT", "i", "-5.25"], ["GET", "i"],
        ["INCRBYFLOAT", "i", "1.7976931348623157e308"], ["INCRBYFLOAT", "i", "1e-20"], ["INCRBYFLOAT", "i"],
        ["SET", "big", "1e4000"], ["INCRBYFLOAT", "big", "1"],
    ]
    yield "set_options", [
        ["SET", "k", "v1"], ["SET", "k", "v2", "GET"], ["SET", "nosuch", "v", "GET"], ["GET", "nosuch"],
        ["SET", "k", "v3", "NX", "GET"], ["GET", "k"], ["SET", "k", "v4", "XX", "GET"], ["SET", "zz", "v", "XX", "GET"],
        ["EXISTS", "zz"], ["SET", "k", "v", "EXAT", "99999999999"], ["EXPIRETIME", "k"], ["PEXPIRETIME", "k"],
        ["SET", "k", "v", "PXAT", "99999999999999"], ["PEXPIRETIME", "k"], ["SET", "k", "v", "EXAT", "1"],
        ["GET", "k"], ["SET", "k", "v", "PXAT", "0"], ["SET", "k", "v", "EXAT", "x"], ["SET", "k", "v", "EX", "5", "EXAT", "5"],
        ["SET", "k", "v", "PXAT", "5", "KEEPTTL"], ["SET", "k", "v", "EX", "100"], ["SET", "k", "w", "KEEPTTL", "GET"],
        ["TTL", "k"], ["SET", "k", "v", "PERSIST"], ["SET", "k", "v", "GET", "GET"], ["SET", "k", "v", "EX", "1", "EX", "100"],
        ["TTL", "k"], ["SET", "k", "v", "NX", "NX"], ["SET", "k", "v", "EX", "x", "NX", "XX"],
        ["GETEX", "k"], ["GETEX", "k", "PERSIST"], ["TTL", "k"], ["GETEX", "k", "EX", "100"], ["TTL", "k"],
        ["GETEX", "k", "PX", "200000"], ["PTTL", "k"], ["GETEX", "k", "EXAT", "99999999999"], ["EXPIRETIME", "k"],
        ["GETEX", "k", "PXAT", "99999999999999"], ["PEXPIRETIME", "k"], ["GETEX", "k", "EX", "0"],
        ["GETEX", "k", "EX", "x"], ["GETEX", "k", "KEEPTTL"], ["GETEX", "k", "NX"], ["GETEX", "k", "EX"],
        ["GETEX", "k", "PERSIST", "EX", "10"], ["GETEX", "nosuch", "EX", "x"], ["GETEX", "nosuch", "BOGUS"],
        ["GETEX", "k", "EXAT", "1"], ["EXISTS", "k"], ["GETEX"],
    ]
    yield "expiry2", [
        ["SET", "k", "v"], ["PERSIST", "k"], ["EXPIRE", "k", "100"], ["PERSIST", "k"], ["TTL", "k"],
        ["PERSIST", "nosuch"], ["PERSIST"], ["EXPIRETIME", "k"], ["EXPIRETIME", "nosuch"], ["PEXPIRETIME", "nosuch"],
        ["EXPIREAT", "k", "99999999999"], ["EXPIRETIME", "k"], ["PEXPIREAT", "k", "99999999999000"],
        ["PEXPIRETIME", "k"], ["EXPIREAT", "k", "x"], ["EXPIREAT", "nosuch", "1"], ["EXPIREAT", "k", str(big)],
        ["PEXPIREAT", "k", str(big)], ["EXPIREAT", "k", "1"], ["EXISTS", "k"], ["SET", "k", "v"],
        ["PEXPIREAT", "k", "-5"], ["EXISTS", "k"], ["SET", "k", "v"],
        ["EXPIRE", "k", "100", "XX"], ["EXPIRE", "k", "100", "NX"], ["TTL", "k"], ["EXPIRE", "k", "200", "NX"],
        ["EXPIRE", "k", "200", "XX"], ["TTL", "k"], ["EXPIRE", "k", "100", "GT"], ["EXPIRE", "k", "300", "GT"],
        ["TTL", "k"], ["EXPIRE", "k", "400", "LT"], ["EXPIRE", "k", "50", "LT"], ["TTL", "k"],
        ["PERSIST", "k"], ["EXPIRE", "k", "100", "GT"], ["EXPIRE", "k", "100", "LT"], ["TTL", "k"],
        ["EXPIRE", "k", "100", "NX", "XX"], ["EXPIRE", "k", "100", "GT", "LT"], ["EXPIRE", "k", "100", "NX", "GT"],
        ["EXPIRE", "k", "100", "BOGUS"], ["EXPIRE", "k", "x", "BOGUS"], ["EXPIRE", "k", "x", "NX", "XX"],
        ["PEXPIRE", "k", "200000", "xx", "gt"], ["PEXPIREAT", "k", "1", "NX", "LT"], ["EXPIREAT", "k"],
        ["TYPE", "k"], ["TYPE", "nosuch"], ["TYPE"], ["EXPIRE", "k", "-10", "LT"], ["TYPE", "k"],
    ]
    yield "rename_copy", [
        ["SET", "a", "1"], ["EXPIRE", "a", "100"], ["RENAME", "a", "b"], ["GET", "b"], ["TTL", "b"], ["EXISTS", "a"],
        ["RENAME", "nosuch", "x"], ["RENAME", "b", "b"], ["RENAME", "nosuch", "nosuch"], ["RENAMENX", "b", "b"],
        ["RENAMENX", "nosuch", "nosuch"], ["SET", "c", "3"], ["RENAMENX", "b", "c"], ["GET", "b"], ["GET", "c"],
        ["RENAMENX", "b", "d"], ["GET", "d"], ["EXISTS", "b"], ["RENAME", "d", "c"], ["GET", "c"], ["TTL", "c"],
        ["RENAME", "c"], ["RENAMENX", "a", "b", "c"],
        ["COPY", "c", "e"], ["GET", "e"], ["TTL", "e"], ["COPY", "c", "e"], ["COPY", "c", "e", "REPLACE"],
        ["COPY", "nosuch", "e"], ["COPY", "nosuch", "e", "REPLACE"], ["COPY", "c"], ["COPY", "c", "c"],
        ["COPY", "c", "f", "replace", "db", "0"], ["GET", "f"],
    ] + [["SET", "key%d" % i, "v%d" % i] for i in range(20)] + [
        ["RENAME", "key%d" % i, "moved%d" % i] for i in range(10)] + [
        ["MGET"] + ["moved%d" % i for i in range(10)] + ["key%d" % i for i in range(20)], ["DBSIZE"]]
    yield "move_unlink_touch", [
        ["SET", "a", "1"], ["PEXPIRE", "a", "500000"], ["MOVE", "a", "3"], ["EXISTS", "a"], ["SELECT", "3"],
        ["GET", "a"], ["PTTL", "a"], ["MOVE", "a", "3"], ["MOVE", "a", "16"], ["MOVE", "a", "x"], ["MOVE", "a", "-1"],
        ["SET", "b", "2"], ["SELECT", "0"], ["SET", "b", "0"], ["SELECT", "3"], ["MOVE", "b", "0"], ["GET", "b"],
        ["MOVE", "nosuch", "0"], ["MOVE", "a"], ["SELECT", "0"],
        ["MSET", "x", "1", "y", "2", "z", "3"], ["TOUCH", "x", "y", "nosuch", "x"], ["TOUCH"],
        ["UNLINK", "x", "nosuch", "x"], ["UNLINK", "y", "z"], ["UNLINK"], ["DBSIZE"],
        ["SET", "s", "Hello World"], ["SUBSTR", "s", "0", "4"], ["SUBSTR", "s", "-5", "-1"], ["SUBSTR", "s", "x", "1"],
        ["SUBSTR", "s", "0"],
    ]
    yield "swapdb", [
        ["SET", "a", "0"], ["SELECT", "1"], ["MSET", "b", "1", "c", "1"], ["SWAPDB", "0", "1"], ["DBSIZE"],
        ["GET", "a"], ["SELECT", "0"], ["MGET", "a", "b", "c"], ["SWAPDB", "1", "1"], ["SWAPDB", "0", "16"],
        ["SWAPDB", "x", "1"], ["SWAPDB", "1", "x"], ["SWAPDB", "-1", "0"], ["SWAPDB", "1"], ["DBSIZE"],
    ]
    yield "keyspace", [["SET", "user:%d" % i, str(i)] for i in range(30)] + [
        ["SET", "other", "x"], ["SET", "h?llo", "1"], ["SET", "hallo", "2"], ["SET", "h*x", "3"],
        ["KEYS", "*"], ["KEYS", "user:1*"], ["KEYS", "user:?"], ["KEYS", "user:[12]"], ["KEYS", "user:[^1-2]"],
        ["KEYS", "h\?llo"], ["KEYS", "h?llo"], ["KEYS", "h[a-b]llo"], ["KEYS", "h[b-a]llo"], ["KEYS", "*x"],
        ["KEYS", "h\*x"], ["KEYS", "[u"], ["KEYS", "user:2[0-9"], ["KEYS", "nomatch*"], ["KEYS", "**r*"],
        ["KEYS"], ["KEYS", "a", "b"], ["DBSIZE"],
        ("scan", []), ("scan", ["COUNT", "3"]), ("scan", ["MATCH", "user:1*"]), ("scan", ["MATCH", "user:*", "COUNT", "7"]),
        ("scan", ["TYPE", "string"]), ("scan", ["TYPE", "list"]), ("scan", ["COUNT", "1000"]),
        ["SCAN", "x"], ["SCAN", " 1"], ["SCAN", "1x"], ["SCAN", "-1", "COUNT", "0"], ["SCAN", "", "COUNT", "0"], ["SCAN", "0", "COUNT", "0"], ["SCAN", "0", "COUNT", "x"],
        ["SCAN", "0", "COUNT"], ["SCAN", "0", "BOGUS", "1"], ["SCAN"],
        ["RANDOMKEY"], ["RANDOMKEY", "x"], ["FLUSHALL"], ["RANDOMKEY"], ["KEYS", "*"], ("scan", []),
        ["SET", "one", "1"], ["RANDOMKEY"], ["SCAN", "0", "COUNT", "100"],
    ]
    yield "inline", [
        b"PING\r\n", b"SET q \"a b\"\r\n", b"GET q\r\n", b"SET q 'c d'\r\n", b"GET q\r\n",
        b"SET q \"\\x41\\n\\t\\\"x\\\\\"\r\n", b"GET q\r\n", b"SET q 'it\\'s'\r\n", b"GET q\r\n",
        b"  ECHO   spaced  \r\n", b"ECHO a\tb\n", b"SET q a\"b c\"\r\n", b"GET q\r\n", b"ECHO \"\"\r\n",
        b"SET q \"x\"y\r\n", ("closed",),
    ]
    yield "multi", [
        ["EXEC"], ["DISCARD"], ["UNWATCH"], ["WATCH"], ["UNWATCH", "x"], ["MULTI", "x"], ["EXEC", "x"],
        ["DISCARD", "x"], ["MULTI"], ["MULTI"], ["WATCH", "a"], ["SET", "a", "1"], ["INCR", "a"], ["EXEC"],
        ["MULTI"], ["SET", "a", "x"], ["INCR", "a"], ["GET", "a"], ["SELECT", "1"], ["SET", "a", "2"],
        ["SELECT", "0"], ["MSET", "b", "1", "c", "2"], ["MGET", "a", "b", "c"], ["DEL", "b", "c"],
        ["RENAME", "a", "d"], ["INCRBYFLOAT", "d", "1"], ["UNWATCH"], ["PING"], ["ECHO", "e"], ["DBSIZE"],
        ["EXEC"], ["GET", "d"], ["SELECT", "1"], ["GET", "a"], ["SELECT", "0"],
        ["MULTI"], ["EXEC"], ["MULTI"], ["SET", "a"], ["GET", "a"], ["EXEC"], ["GET", "a"],
        ["MULTI"], ["NOSUCH", "x"], ["SET", "a", "1"], ["EXEC"], ["GET", "a"],
        ["MULTI"], ["DISCARD", "x"], ["EXEC"], ["MULTI"], ["EXEC", "x"], ["EXEC"],
        ["MULTI"], ["SET", "a", "y"], ["DISCARD"], ["GET", "a"], ["DISCARD"],
        ["MULTI"], ["GET", "d"], ["multi"], ["watch", "a"], ["exec"],
        b"MULTI\r\n", b"SET i 1\r\n", b"INCR i\r\n", b"EXEC\r\n",
        ["MULTI"], ["SET", "a", "z"], ["QUIT"], ("closed",),
    ]
    # A subcommand unknown or of a wrong arity is refused when queued (EXEC aborts); right ones are queued.
    yield "multi subcommands", [
        ["MULTI"], ["CONFIG", "NOSUCH"], ["EXEC"], ["MULTI"], ["CLIENT", "SETNAME"], ["EXEC"],
        ["MULTI"], ["COMMAND", "COUNT", "x"], ["EXEC"], ["MULTI"], ["COMMAND", "GETKEYS", "get"], ["EXEC"],
        ["MULTI"], ["config", "get"], ["SET", "a", "1"], ["EXEC"], ["GET", "a"],
        ["MULTI"], ["client", "Nosuch", "a", "b"], ["EXEC"], ["MULTI"], ["CLIENT", "SETNAME", "a", "b"], ["EXEC"],
        ["MULTI"], ["CONFIG", "REWRITE", "x"], ["CLIENT", "TRACKING"], ["COMMAND", "x" * 200], ["EXEC"],
        ["MULTI"], ["CONFIG", "a\0b"], ["EXEC"],
        ["MULTI"], ["COMMAND", "INFO", "get"], ["CONFIG", "GET", "save"], ["CLIENT", "SETNAME", "x"],
        ["CLIENT", "GETNAME"], ["EXEC"],
        ["CLIENT", "TRACKING"], ["CONFIG", "REWRITE", "x"], ["COMMAND", "HELP", "x"], ["CONFIG", "NOSUCH", "x"],
    ]
    # WATCH w, a change made by a second connection, then MULTI GET EXEC: the null array when it counts
    # as a change of w, the GET's reply otherwise.
    changes = [
        ["SET", "w", "1"], ["SET", "w", "2"], ["SET", "w", "2", "NX"], ["SET", "w", "3", "XX"],
        ["INCR", "w"], ["DECRBY", "w", "2"], ["INCRBYFLOAT", "w", "1.5"], ["APPEND", "w", "x"],
        ["SETRANGE", "w", "0", "y"], ["SETRANGE", "w", "0", ""], ["GETSET", "w", "4"], ["GET", "w"],
        ["EXPIRE", "w", "100"], ["TTL", "w"], ["PERSIST", "w"], ["PERSIST", "w"],
        ["GETEX", "w", "EX", "100"], ["GETEX", "w", "PERSIST"], ["GETEX", "w", "PERSIST"], ["GETEX", "w"],
        ["PEXPIREAT", "w", "1"], ["SET", "w", "5"], ["DEL", "w"], ["SETNX", "w", "6"], ["SETNX", "w", "7"],
        ["MSET", "w", "8", "q", "1"], ["MSETNX", "w", "9", "r", "1"], ["SET", "other", "1"],
        ["RENAME", "w", "w2"], ["RENAME", "w2", "w"], ["RENAMENX", "q", "w"], ["COPY", "q", "w"],
        ["COPY", "q", "w", "REPLACE"], ["MOVE", "w", "1"], ["MOVE", "w", "1"], ["SWAPDB", "0", "1"],
        ["UNLINK", "w"], ["EXISTS", "w"], ["FLUSHDB"], ["SET", "w", "1"], ["FLUSHALL"], ["FLUSHALL"],
    ]
    seq = []
    for change in changes:
        seq += [["WATCH", "w"], ("other", change), ["MULTI"], ["GET", "w"], ["EXEC"]]
    seq += [
        # A key created and deleted again, watched absent, changed.
        ["WATCH", "n"], ("other", ["SET", "n", "1"]), ("other", ["DEL", "n"]), ["MULTI"], ["EXEC"],
        # UNWATCH, DISCARD and EXEC forget the watches.
        ["SET", "w", "1"], ["WATCH", "w"], ("other", ["SET", "w", "2"]), ["UNWATCH"], ["MULTI"], ["GET", "w"],
        ["EXEC"], ["WATCH", "w"], ("other", ["SET", "w", "3"]), ["MULTI"], ["DISCARD"], ["MULTI"], ["GET", "w"],
        ["EXEC"], ["WATCH", "w"], ["MULTI"], ["EXEC"], ("other", ["SET", "w", "4"]), ["MULTI"], ["GET", "w"],
        ["EXEC"],
        # The watcher's own change counts; a watch is of one database; several keys, any change counts.
        ["WATCH", "w"], ["SET", "w", "5"], ["MULTI"], ["GET", "w"], ["EXEC"],
        ["SELECT", "1"], ["WATCH", "w"], ["SELECT", "0"], ("other", ["SET", "w", "6"]), ["MULTI"], ["EXEC"],
        ["WATCH", "a", "b", "w", "c", "a"], ("other", ["SET", "c", "1"]), ["MULTI"], ["GET", "w"], ["EXEC"],
        ["WATCH", "a", "b"], ["WATCH", "w", "c"], ("other", ["SET", "b", "1"]), ["MULTI"], ["EXEC"],
        # An aborted transaction forgets the watches too.
        ["WATCH", "w"], ("other", ["SET", "w", "7"]), ["MULTI"], ["NOSUCH"], ["EXEC"], ["MULTI"], ["GET", "w"],
        ["EXEC"], ["WATCH", "w"], ["MULTI"], ["EXEC", "x"], ("other", ["SET", "w", "8"]), ["MULTI"], ["EXEC"],
        # The second connection's transactions, on the same keys.
        ("other", ["WATCH", "w"]), ["SET", "w", "9"], ("other", ["MULTI"]), ("other", ["GET", "w"]),
        ("other", ["EXEC"]), ("other", ["MULTI"]), ("other", ["INCR", "w"]), ("other", ["EXEC"]),
        ["GET", "w"],
    ]
    yield "watch", seq
    yield "inline_unbalanced", [b"PING\r\n", b"SET a \"b\r\nPING\r\n", ("closed",)]
    yield "inline_unbalanced_single", [b"ECHO 'x\r\n", ("closed",)]


def random_sequence(rng, n):
    """String, key and expiry commands over 6 keys. Relative expiry times are distinct by hundreds of seconds
    and NX/XX/GT/LT compare against absolute ones, so no reply depends on which millisecond a server read."""
    keys = ["k%d" % i for i in range(6)]
    values = ["0", "1", "-7", "42", "01", "-0", "+1", " 1", "abc", "", "9223372036854775807", "x y", "2.5"]
    at = [str(int(time.time()) + 777), "9999999999", "8888888888", "1", "x"]
    future = at[:3] + ["x"]  # SET stores a key whose EXAT is past; Redis's DBSIZE counts it until it is reclaimed
    seq = []
    for _ in range(n):
        k, k2 = rng.choice(keys), rng.choice(keys)
        v = rng.choice(values)
        c = rng.randrange(30)
        if c == 0:
            seq.append(["SET", k, v] + rng.choice([[], ["NX"], ["XX"], ["EX", "1000"], ["PX", "900000"],
                                                    ["KEEPTTL"], ["EX", v], ["NX", "XX"], ["GET"], ["XX", "GET"],
                                                    ["EXAT", rng.choice(future)]]))
        elif c == 1:
            seq.append([rng.choice(["GET", "STRLEN", "TYPE", "GETDEL", "PERSIST"]), k])
        elif c == 2:
            seq.append([rng.choice(["DEL", "UNLINK"])] + rng.sample(keys, rng.randint(1, 3)))
        elif c == 3:
            seq.append([rng.choice(["EXISTS", "TOUCH"])] + [rng.choice(keys) for _ in range(rng.randint(1, 3))])
        elif c == 4:
            seq.append([rng.choice(["INCR", "DECR"]), k])
        elif c == 5:
            seq.append([rng.choice(["INCRBY", "DECRBY", "INCRBYFLOAT"]), k, rng.choice(values)])
        elif c == 6:
            seq.append([rng.choice(["MSET", "MSETNX"])] +
                       [x for kk in rng.sample(keys, rng.randint(1, 3)) for x in (kk, rng.choice(values))])
        elif c == 7:
            seq.append(["MGET"] + [rng.choice(keys) for _ in range(rng.randint(1, 4))])
        elif c == 8:
            seq.append(["EXPIRE", k, rng.choice(["5000", "0", "-1", "x", "01"])])
        elif c == 9:
            seq.append(["PEXPIRE", k, rng.choice(["1200000", "0", "-5", "y"])])
        elif c == 10:
            seq.append([rng.choice(["TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME"]), k])
        elif c == 11:
            seq.append(["DBSIZE"])
        elif c == 12:
            seq.append(["KEYS", rng.choice(["*", "k[0-2]", "k?"])])
        elif c == 13:
            seq.append(["APPEND", k, rng.choice(values)])
        elif c == 14:
            seq.append(["GETRANGE", k, rng.choice(["0", "-1", "2", "-3", "x"]), rng.choice(["-1", "1", "10", "-2"])])
        elif c == 15:
            seq.append(["SETRANGE", k, rng.choice(["0", "3", "-1", "x"]), rng.choice(values)])
        elif c == 16:
            seq.append([rng.choice(["GETSET", "SETNX"]), k, v])
        elif c == 17:
            seq.append(["SETEX", k, rng.choice(["2000", "0", "x"]), v])
        elif c == 18:
            seq.append([rng.choice(["RENAME", "RENAMENX"]), k, k2])
        elif c == 19:
            seq.append(["COPY", k, k2] + rng.choice([[], ["REPLACE"], ["DB", "1"], ["DB", "0", "REPLACE"]]))
        elif c == 20:
            seq.append(["GETEX", k] + rng.choice([[], ["PERSIST"], ["EX", "3000"], ["PXAT", rng.choice(at)], ["EX", "0"]]))
        elif c == 21:
            seq.append([rng.choice(["EXPIREAT", "PEXPIREAT"]), k, rng.choice(at)] +
                       rng.choice([[], ["NX"], ["XX"], ["GT"], ["LT"], ["NX", "GT"]]))
        elif c == 22:
            seq.append(["SELECT", rng.choice(["0", "0", "1"])])
        elif c == 23:
            seq.append(["MOVE", k, rng.choice(["0", "1"])])
        else:
            seq.append(["GET", k])
    return seq

-- mcpproxy's shared state, version 1: what the replicas of one cluster share.
-- Applied by the binary at start (host/src/cluster/migrate.rs); never edit a released
-- migration: add the next one.

-- Flags of the whole cluster (`launch_binding`: approvals are bound to launch specs).
CREATE TABLE mcpproxy_meta (
    key text PRIMARY KEY,
    value text NOT NULL
);

-- What a person decided about each upstream server (trust/store.rs's ServerTrust).
CREATE TABLE mcpproxy_trust_servers (
    server text PRIMARY KEY,
    approved_at text,
    approved_by text,
    launch jsonb,
    updated_at timestamptz NOT NULL DEFAULT now(),
    updated_by text NOT NULL
);

-- Each approved tool's pinned form.
CREATE TABLE mcpproxy_trust_pins (
    server text NOT NULL REFERENCES mcpproxy_trust_servers (server) ON DELETE CASCADE,
    tool text NOT NULL,
    pin jsonb NOT NULL,
    PRIMARY KEY (server, tool)
);

-- Tools a replica saw change since they were pinned: held on every replica until approved.
CREATE TABLE mcpproxy_trust_held (
    server text NOT NULL REFERENCES mcpproxy_trust_servers (server) ON DELETE CASCADE,
    tool text NOT NULL,
    held jsonb NOT NULL,
    PRIMARY KEY (server, tool)
);

-- The cluster's upstream servers: each `mcpServers` entry as written (references such as
-- ${secret:NAME} kept as text), in the order they were added.
CREATE TABLE mcpproxy_servers (
    name text PRIMARY KEY,
    entry jsonb NOT NULL,
    position bigserial NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    updated_by text NOT NULL
);

-- Shared token buckets (rate limits across replicas): the tokens left after the last take,
-- when that was (the database's clock), and whether it was allowed.
CREATE TABLE mcpproxy_buckets (
    key text PRIMARY KEY,
    tokens double precision NOT NULL,
    updated_at timestamptz NOT NULL,
    allowed boolean NOT NULL
);

-- One row per replica, its heartbeat.
CREATE TABLE mcpproxy_replicas (
    name text PRIMARY KEY,
    version text NOT NULL,
    started_at timestamptz NOT NULL,
    seen_at timestamptz NOT NULL
);

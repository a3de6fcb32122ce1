-- mcpproxy's shared state, version 2: calls that wait for a person's approval
-- (`approvals`), so that an answer through any replica releases the call waiting on another.

-- One row per waiting call, put in by the replica where it waits and taken away when the
-- wait ends. `pending` is what `approvals list` shows; `decision` stays NULL until a person
-- answers ('approved' or 'denied'), and the first answer is the one kept.
CREATE TABLE mcpproxy_approvals (
    id text PRIMARY KEY,
    replica text NOT NULL,
    pending jsonb NOT NULL,
    expires_at timestamptz NOT NULL,
    decision text CHECK (decision IN ('approved', 'denied')),
    decided_by text,
    reason text,
    decided_at timestamptz
);

CREATE INDEX mcpproxy_approvals_expires_at ON mcpproxy_approvals (expires_at);

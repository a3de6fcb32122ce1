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

-- The questions asked of 2026-07-28 clients through an `input_required` result, until the
-- client's retry: the retry may reach another replica (a load balancer without stickiness),
-- which takes the question from here. `question` is what binds it to its call; a question is
-- taken once (DELETE ... RETURNING).
CREATE TABLE mcpproxy_approval_questions (
    id text PRIMARY KEY,
    question jsonb NOT NULL,
    expires_at timestamptz NOT NULL
);

CREATE INDEX mcpproxy_approval_questions_expires_at ON mcpproxy_approval_questions (expires_at);

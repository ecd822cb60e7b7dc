-- The owner of an outbox lease: each lease (GET /v1/outbox, a webhook's worker) hands its
-- rows out under a fresh random token, and only that token acknowledges, fails or hands
-- back those rows. It stays on a row after the lease passes (a late ack of the same
-- consumer still counts, until another lease takes the row) and after the ack (a repeated
-- ack of the same consumer is fine); failing or retrying the row clears it.
ALTER TABLE outbox ADD COLUMN lease_token TEXT NOT NULL DEFAULT '';

-- The chat an inbox message was written in (POST /v1/messages's chat_jid, or
-- POST /v1/groups/{folder}/messages's): the chat its turn answers, where send_reply without
-- a chat_jid goes. '' for messages without one (inject, delegate, task, or a caller that
-- gave none).
ALTER TABLE inbox ADD COLUMN chat_jid TEXT NOT NULL DEFAULT '';

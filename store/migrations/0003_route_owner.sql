-- Who added a route: '' for the operator (the API and the CLI), otherwise the folder of
-- the group whose agent added it. Routing consults a group's routes only for messages
-- already routed to that group (ipc/ROUTES.md), so routes added before owners were
-- recorded stay the operator's and route as they did.
ALTER TABLE routes ADD COLUMN owner TEXT NOT NULL DEFAULT '';
CREATE INDEX routes_owner ON routes (owner, seq, id);

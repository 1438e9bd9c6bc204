-- Indexes for two administration reads that walked whole tables on a large database
-- (bench/scale.ts, issue #54).
--
-- The admin user search (src/admin/queries.ts searchAdminUsers): `username ILIKE '%term%' OR
-- email ILIKE ... OR full_name ILIKE ...`. A btree cannot serve a match in the middle of a
-- value; a GIN trigram index per column can, and the planner combines the three (BitmapOr)
-- for a term of 3 characters or more. A term that matches nearly every row is still read
-- newest first by the primary key until the page is full (the planner's choice: the
-- pattern's selectivity is estimated from the columns' statistics). Shorter terms have no
-- trigram to look up: the planner reads them by the primary key, as before.
--
-- fastupdate off: with it, new entries wait in the index's pending list, which every search
-- reads whole and the planner counts, until a vacuum merges it: after a bulk load of users the
-- planner chose a Seq Scan of the table over the index (measured: 100,000 users inserted, then
-- ANALYZE). Users are written seldom; each insert updates the three indexes at once instead.
--
-- pg_trgm is a trusted extension (PostgreSQL 13 and later): a role with CREATE on the
-- database (its owner, as the service's role usually is) may create it without being
-- superuser. A role that may not (an older server, or a role without CREATE on the database)
-- fails this migration, and the service does not start: the search must not quietly turn
-- into a scan of every user again. Then a superuser runs `CREATE EXTENSION pg_trgm` in the
-- database once, and this migration passes (IF NOT EXISTS). The embedded database (PGlite)
-- loads the extension from @electric-sql/pglite/contrib/pg_trgm (src/db/embedded.ts).
--
-- These builds take a lock that holds writes to users and audit_log until they finish (a
-- migration runs in a transaction, so not CONCURRENTLY): seconds for a million users, about
-- as long for ten million audit rows. On a larger database, build them beforehand by hand with
-- CREATE INDEX CONCURRENTLY under these names; IF NOT EXISTS then leaves them.
CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE INDEX IF NOT EXISTS users_username_trgm ON users USING gin (username gin_trgm_ops) WITH (fastupdate = off);
CREATE INDEX IF NOT EXISTS users_email_trgm ON users USING gin (email gin_trgm_ops) WITH (fastupdate = off);
CREATE INDEX IF NOT EXISTS users_full_name_trgm ON users USING gin (full_name gin_trgm_ops) WITH (fastupdate = off);

-- The audit API and page filtered by action and outcome (src/audit/queries.ts auditPage, newest
-- first, and the export's batches, oldest first, both by id): audit_log_action (action, id)
-- had to read past every entry of that action with the other outcome.
CREATE INDEX IF NOT EXISTS audit_log_action_outcome ON audit_log (action, outcome, id);

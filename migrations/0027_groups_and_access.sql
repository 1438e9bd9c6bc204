-- Groups, and who may use which client system (docs/access.md).
--
-- A group is a name (`finance`); users are in any number of groups. A client system is open to
-- every active user (both lists empty: what every client was before this file) or restricted
-- to the users in one of `allow_groups` or with one of the roles in `allow_roles`. The rule is
-- two columns of the clients row, so seed files and psql write it like the other fields, the
-- database checks it (a group that does not exist is refused, naming it), and a change of it
-- is announced to every instance by the clients triggers (migrations/0010) and audited here.

CREATE TABLE groups (
  id          integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name        text NOT NULL UNIQUE,
  created_at  timestamptz NOT NULL DEFAULT now(),
  -- the form src/access/service.ts checks: lower-case, as it appears in tokens (group:NAME)
  CONSTRAINT groups_name_valid CHECK (name ~ '^[a-z0-9][a-z0-9_.-]{0,63}$')
);

CREATE TABLE user_groups (
  user_id     integer NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  group_id    integer NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
  added_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (user_id, group_id)
);
CREATE INDEX user_groups_by_group ON user_groups (group_id);

ALTER TABLE clients
  ADD COLUMN allow_groups text[] NOT NULL DEFAULT '{}',
  ADD COLUMN allow_roles text[] NOT NULL DEFAULT '{}',
  -- false: not shown on the dashboard's launcher (a machine-only client); its rule still holds
  ADD COLUMN listed boolean NOT NULL DEFAULT true;

-- True when every entry matches `pattern` and the array has one dimension: the CHECKs behind the
-- trigger below, in the forms of groups.name and of users' roles (src/users/roles.ts ROLE).
CREATE FUNCTION client_names_match(entries text[], pattern text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(array_ndims(entries), 1) = 1
     AND NOT EXISTS (SELECT 1 FROM unnest(entries) AS e WHERE e IS NULL OR e !~ pattern)
$$;

ALTER TABLE clients
  ADD CONSTRAINT clients_allow_groups_valid CHECK (client_names_match(allow_groups, '^[a-z0-9][a-z0-9_.-]{0,63}$')),
  ADD CONSTRAINT clients_allow_roles_valid CHECK (client_names_match(allow_roles, '^[a-z][a-z0-9_.-]{0,31}$'));

-- Checks and canonicalizes the rule of every written row with messages that name the client and
-- the value (what `npm run seed` shows): each group must exist (held FOR KEY SHARE until the
-- commit, so a delete of it at the same time waits and then sees it named), entries are kept
-- once and sorted. Runs after clients_before_write (triggers of one event run in name order), which
-- keeps updated_at when none of its columns changed: a change of the rule moves it here.
CREATE FUNCTION clients_check_access() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
  entry text;
BEGIN
  IF NEW.allow_groups IS NULL OR NEW.allow_roles IS NULL OR NEW.listed IS NULL THEN
    RAISE EXCEPTION 'allow_groups, allow_roles and listed of client % must not be NULL (''{}'' and ''{}'': open to every active user)', NEW.client_id
      USING ERRCODE = 'check_violation';
  END IF;
  FOREACH entry IN ARRAY NEW.allow_groups LOOP
    IF entry IS NULL OR entry !~ '^[a-z0-9][a-z0-9_.-]{0,63}$' THEN
      RAISE EXCEPTION 'allow_groups entry "%" of client % is not a group name (lower-case letters, digits, . _ -)', coalesce(entry, 'NULL'), NEW.client_id
        USING ERRCODE = 'check_violation';
    END IF;
    PERFORM 1 FROM groups WHERE name = entry FOR KEY SHARE;
    IF NOT FOUND THEN
      RAISE EXCEPTION 'allow_groups of client % names group "%", which does not exist (create it first: auth-admin group create %)', NEW.client_id, entry, entry
        USING ERRCODE = 'check_violation';
    END IF;
  END LOOP;
  FOREACH entry IN ARRAY NEW.allow_roles LOOP
    IF entry IS NULL OR entry !~ '^[a-z][a-z0-9_.-]{0,31}$' THEN
      RAISE EXCEPTION 'allow_roles entry "%" of client % is not a role (lower-case letters, digits, . _ -, up to 32)', coalesce(entry, 'NULL'), NEW.client_id
        USING ERRCODE = 'check_violation';
    END IF;
  END LOOP;
  NEW.allow_groups := ARRAY(SELECT DISTINCT g FROM unnest(NEW.allow_groups) AS g ORDER BY g);
  NEW.allow_roles := ARRAY(SELECT DISTINCT r FROM unnest(NEW.allow_roles) AS r ORDER BY r);
  IF TG_OP = 'UPDATE' AND (NEW.allow_groups, NEW.allow_roles, NEW.listed) IS DISTINCT FROM (OLD.allow_groups, OLD.allow_roles, OLD.listed) THEN
    NEW.updated_at := now();
  END IF;
  RETURN NEW;
END $$;

CREATE TRIGGER clients_before_write_access BEFORE INSERT OR UPDATE ON clients
  FOR EACH ROW EXECUTE FUNCTION clients_check_access();

-- Audits a rule or listing set on a new client, or changed on an existing one (client.update,
-- `changed` naming only these fields; a change of other fields in the same statement has its own
-- entry from clients_after_write), whoever writes it: the CLI, the panel, the API, seeds, psql.
CREATE FUNCTION clients_audit_access() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
  actor constant jsonb := clients_change_actor();
  changed jsonb;
BEGIN
  IF TG_OP = 'INSERT' THEN
    changed := jsonb_strip_nulls(jsonb_build_object(
      'allow_groups', CASE WHEN cardinality(NEW.allow_groups) > 0 THEN to_jsonb(NEW.allow_groups) END,
      'allow_roles', CASE WHEN cardinality(NEW.allow_roles) > 0 THEN to_jsonb(NEW.allow_roles) END,
      'listed', CASE WHEN NOT NEW.listed THEN to_jsonb(false) END));
  ELSE
    changed := jsonb_strip_nulls(jsonb_build_object(
      'allow_groups', CASE WHEN NEW.allow_groups IS DISTINCT FROM OLD.allow_groups THEN to_jsonb(NEW.allow_groups) END,
      'allow_roles', CASE WHEN NEW.allow_roles IS DISTINCT FROM OLD.allow_roles THEN to_jsonb(NEW.allow_roles) END,
      'listed', CASE WHEN NEW.listed IS DISTINCT FROM OLD.listed THEN to_jsonb(NEW.listed) END));
  END IF;
  IF changed = '{}'::jsonb THEN
    RETURN NULL;
  END IF;
  INSERT INTO audit_log (action, outcome, client_id, ip_address, user_agent, details)
  VALUES ('client.update', 'success', NEW.client_id, actor->>'ip_address', actor->>'user_agent',
          (actor - 'ip_address' - 'user_agent') || jsonb_build_object('changed', changed));
  RETURN NULL;
END $$;

CREATE TRIGGER clients_audit_access AFTER INSERT OR UPDATE ON clients
  FOR EACH ROW EXECUTE FUNCTION clients_audit_access();

-- A group a client's rule names cannot be deleted or renamed: the client would silently be open
-- to fewer (or, with no name left, to all) users. The message names the clients to change first.
CREATE FUNCTION groups_keep_named() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
  naming text;
BEGIN
  IF TG_OP = 'UPDATE' AND NEW.name IS NOT DISTINCT FROM OLD.name THEN
    RETURN NEW;
  END IF;
  SELECT string_agg(client_id, ', ' ORDER BY client_id) INTO naming FROM clients WHERE OLD.name = ANY (allow_groups);
  IF naming IS NOT NULL THEN
    RAISE EXCEPTION 'group "%" is named by the access rule of client %; remove it there first', OLD.name, naming
      USING ERRCODE = 'foreign_key_violation';
  END IF;
  RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
END $$;

CREATE TRIGGER groups_keep_named BEFORE UPDATE OR DELETE ON groups
  FOR EACH ROW EXECUTE FUNCTION groups_keep_named();

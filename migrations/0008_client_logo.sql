-- An optional logo per client system, shown on its sign-in page: a path under /assets or a
-- data:image/...;base64, URL (checked by the service, see src/pages/logo-url.ts). NULL shows
-- the organisation's logo, so existing rows and plain inserts need nothing.
ALTER TABLE clients ADD COLUMN logo_url text CHECK (logo_url IS NULL OR length(logo_url) <= 15000);

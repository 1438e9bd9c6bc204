// The user as the other capabilities see it (src/users/queries.ts reads it).
/** A user as stored, without secrets. */
export interface UserRecord {
  id: number;
  username: string;
  email: string;
  role: string;
  full_name: string;
  active: boolean;
  totp_enabled: boolean;
}

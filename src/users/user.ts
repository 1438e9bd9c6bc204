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

/** The values an editing page showed of the profile fields it saves (409 edit_conflict when one has moved since: refuseEditConflicts). */
export type ShownProfile = Partial<Record<'email' | 'full_name' | 'role', string>>;

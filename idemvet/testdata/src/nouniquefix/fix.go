package nouniquefix

const schema = `CREATE TABLE processed_messages (message_id text NOT NULL, at timestamptz)` // want "dedup table processed_messages"

-- What fills the prompt around the chunks, for the inspector's prompt strip: the
-- instructions, earlier turns, the question and the answer format, as token ranges in prompt
-- order (collector/normalize/sections.py; docs/zero-code.md, "Prompt sections"). Requests
-- stored before this migration have none until `midtrace rebuild`.
ALTER TABLE requests ADD COLUMN prompt_sections STRUCT(kind VARCHAR, token_start INTEGER, token_end INTEGER)[];

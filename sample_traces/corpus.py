"""The synthetic knowledge base of a fictional SaaS ("Fieldnote") and its support assistant.

Documents are split into chunks; a chunk's id is ``<document id>#<position>``. Nothing here
describes a real company. ``questions.py`` says, per question, which chunks answer it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date


@dataclass(frozen=True)
class Document:
    id: str
    title: str
    kind: str
    authority: str
    updated: date
    chunks: tuple[str, ...]
    # Access filter: chunks of internal documents are retrieved but filtered before the prompt.
    internal: bool = False
    # A mirror repeats another document's chunks word for word (dropped by deduplication).
    mirror_of: str | None = None


@dataclass(frozen=True)
class CorpusChunk:
    id: str
    source_id: str
    position: int
    text: str
    authority: str
    updated: date
    internal: bool
    mirror_of: str | None


def _doc(id: str, title: str, kind: str, authority: str, updated: str, *chunks: str,
         internal: bool = False, mirror_of: str | None = None) -> Document:
    return Document(id, title, kind, authority, date.fromisoformat(updated), tuple(chunks),
                    internal, mirror_of)


_CHANGELOG = (
    "2026.10 release: the Admin API rate limit is raised from 300 to 600 requests per minute "
    "per workspace. Burst allowance stays at 50 requests per second. No client changes are "
    "needed; responses now include X-RateLimit-Remaining on every call.",
    "2026.08 release: audit log export through the Admin API is generally available. The "
    "export endpoint streams events as NDJSON. See the Admin API reference for plan "
    "requirements before enabling it for a customer.",
    "2026.06 release: API keys can now be rotated with an overlap window. A workspace may hold "
    "two active keys at once, so integrations can switch to the new key before the old one "
    "is revoked.",
    "2026.04 release: webhooks v2. Every delivery is signed with HMAC-SHA256 in the "
    "Fieldnote-Signature header, retries use exponential backoff for up to 24 hours, and "
    "payloads include a schema version.",
    "2026.02 release: EU data residency. New Enterprise workspaces can choose the Frankfurt "
    "region at creation time. Existing workspaces keep their current region.",
)

DOCUMENTS: tuple[Document, ...] = (
    _doc("refund-policy", "Refund policy", "policy", "canonical", "2026-08-14",
         "This policy covers refunds for Fieldnote subscriptions bought directly from us. "
         "Purchases made through a reseller or a marketplace are refunded by that seller under "
         "their own terms.",
         "Monthly plans: you can cancel at any time and keep access until the end of the paid "
         "month. Monthly charges are not refunded, except when a billing error charged you "
         "twice for the same period.",
         "Annual plans: refund requests for annual subscriptions must be made within 14 days "
         "of the charge. After 14 days the request expires and the plan stays active until "
         "the end of the term. Partial-year refunds are not offered.",
         "To request a refund, a workspace owner opens Settings > Billing > Request refund, or "
         "writes to billing@fieldnote.example from the owner's address. Refunds go back to "
         "the original payment method within 5 to 10 business days.",
         "Downgrades take effect at the next renewal. When you downgrade mid-term from an "
         "annual plan, the unused difference is kept as account credit, not paid out, and is "
         "applied to future invoices.",
         "We may refuse a refund when an account was suspended for abuse or when the same "
         "workspace received a refund in the previous 12 months. Such decisions can be appealed "
         "once, in writing."),
    _doc("hub-warranty", "Fieldnote Hub hardware warranty", "policy", "canonical", "2026-03-02",
         "The Fieldnote Hub meeting-room device carries a two-year limited warranty against "
         "defects in materials and workmanship from the date of delivery. The warranty is not "
         "transferable.",
         "Warranty claims must be filed within 30 days of noticing a defect, with the device "
         "serial number and a short description or video of the fault. Claims filed later "
         "than 30 days after the defect is noticed may be declined.",
         "The warranty does not cover damage from drops, liquids, unauthorised repairs, or "
         "normal wear of the fabric cover and the power cable. Accessories carry a 90-day "
         "warranty.",
         "Approved claims get an advance replacement: we ship a refurbished Hub within two "
         "business days and include a prepaid label to return the faulty unit within 14 "
         "days."),
    _doc("billing-faq", "Billing FAQ", "help_center", "canonical", "2026-06-20",
         "We accept Visa, Mastercard, American Express and SEPA direct debit. Annual plans "
         "over 50 seats can also pay by bank transfer against an invoice. Prices are shown in "
         "EUR, USD or GBP.",
         "Invoices are emailed to the billing contact on every charge and can be downloaded "
         "from Settings > Billing > Invoices as PDF for the last 24 months. Older invoices are "
         "sent on request.",
         "If a payment fails we retry three times over 7 days. The workspace keeps full access "
         "during this 7-day grace period; after it, the workspace becomes read-only until "
         "the balance is paid.",
         "You can switch from monthly to annual billing at any time; the change applies "
         "immediately and the remaining monthly period is credited. Switching from annual to "
         "monthly takes effect at renewal.",
         "To show a VAT or tax ID on invoices, add it under Settings > Billing > Tax details. "
         "It appears on invoices issued after the change; past invoices are not reissued."),
    _doc("admin-api", "Admin API reference", "api_doc", "canonical", "2026-09-18",
         "The Admin API authenticates with workspace API keys sent as a Bearer token. Keys "
         "are created by workspace owners and admins and carry scopes such as users:read and "
         "audit:export.",
         "Rate limits: the Admin API allows 600 requests per minute per workspace, with bursts "
         "of up to 50 requests per second. Limits apply across all keys of the workspace.",
         "List endpoints are paginated with an opaque cursor. Pass the next_cursor value from "
         "a response as the cursor parameter; page size defaults to 100 and can be at most "
         "500.",
         "GET /admin/v2/audit-logs/export streams audit events as newline-delimited JSON for "
         "a time range given by since and until. The key needs the audit:export scope.",
         "The audit log export endpoint is available only to Enterprise Plus workspaces after "
         "the AuditExport feature flag is enabled. Support enables the flag on request from a "
         "workspace owner; without it the endpoint returns 403.",
         "SCIM 2.0 provisioning is served at /scim/v2. It needs SAML single sign-on to be "
         "enforced for the workspace first; until then SCIM requests are rejected with 409.",
         "Webhook deliveries are signed: verify the Fieldnote-Signature header as an "
         "HMAC-SHA256 of the raw request body with your endpoint secret, and reject "
         "deliveries older than five minutes.",
         "When you exceed a rate limit the API answers 429 Too Many Requests with a "
         "Retry-After header in seconds. Clients should wait at least that long and retry "
         "with jitter."),
    _doc("security-policy", "Security and data policy", "policy", "canonical", "2026-07-01",
         "Customer data is encrypted at rest with AES-256 and in transit with TLS 1.2 or "
         "newer. Encryption keys are rotated every 90 days and managed in a hardware security "
         "module.",
         "When a workspace is deleted, its data is kept for 30 days so an owner can restore "
         "it, then permanently erased from primary storage. Backups age out within a further "
         "60 days.",
         "Audit logs are retained for 365 days on Enterprise and Enterprise Plus plans and for "
         "90 days on all other plans. Older events cannot be recovered. Not even by support.",
         "SAML single sign-on is available on the Business plan and above. Starter workspaces "
         "can use Google or Microsoft sign-in but cannot enforce SSO for their members..",
         "Admins can require two-factor authentication for all members under Settings > "
         "Security. Members without 2FA are asked to set it up at their next sign-in.",
         "EU data residency is available on Enterprise plans for new workspaces only. Moving "
         "an existing workspace to the EU region needs a migration request to support and a "
         "maintenance window."),
    _doc("plans", "Plans and limits", "policy", "canonical", "2026-09-01",
         "Fieldnote has four plans: Starter, Business, Enterprise and Enterprise Plus. Prices "
         "are per seat; annual billing is 20% cheaper than monthly. There are no other discounts.",
         "Starter allows up to 10 seats. Business allows up to 300 seats. Enterprise and "
         "Enterprise Plus have no seat limit. Seats above the limit need a plan upgrade.",
         "Storage: Starter includes 10 GB per workspace, Business 1 TB, Enterprise and "
         "Enterprise Plus unlimited, subject to fair use. Attachments count towards storage.",
         "Enterprise Plus adds audit log export, a 99.95% uptime SLA and a named support "
         "engineer to everything in Enterprise. It is sold on annual contracts of 100 seats or "
         "more.",
         "Every new workspace starts with a 14-day free trial of the Business plan. Sales can "
         "extend a trial once by up to 14 more days. No card is needed to start one.",
         "Guest seats are free on Business and above, up to five guests per paid seat. Guests "
         "can only see the projects they are invited to. Starter has no guest seats."),
    _doc("changelog", "Product changelog", "changelog", "canonical", "2026-10-15", *_CHANGELOG),
    _doc("release-notes-mirror", "Release notes (partner portal mirror)", "changelog", "mirror",
         "2026-10-15", *_CHANGELOG, mirror_of="changelog"),
    _doc("migration-v1", "Migrating from API v1 to v2 (2024)", "migration_note", "deprecated",
         "2024-05-10",
         "The v1 Admin API is rate limited to 100 requests per minute per API token. When "
         "migrating, spread bulk jobs over time to stay under 100 requests per minute.",
         "Enterprise customers can export audit logs through GET /v1/audit with any admin "
         "token. The v2 API will keep this behaviour for all Enterprise workspaces.",
         "To rotate a v1 key, revoke the old key first, then create the new one and update "
         "your integrations. Expect a short interruption while the new key propagates.",
         "v1 webhooks are delivered unsigned over HTTPS. Restrict your endpoint by IP "
         "allow-list to the published Fieldnote egress ranges. The ranges change rarely."),
    _doc("api-keys", "API keys guide", "api_doc", "canonical", "2026-06-30",
         "Create an API key under Settings > API keys. Give it a name, choose its scopes, "
         "and copy the secret: it is shown only once. Keys belong to the workspace, not to the "
         "person who made them.",
         "To rotate a key without downtime, create a second key, deploy it to your "
         "integrations, and revoke the old key once traffic has moved. Two keys may be active "
         "at the same time for up to 24 hours of overlap.",
         "Scopes limit what a key can do. Prefer the narrowest scopes; audit:export and "
         "users:write are sensitive and only owners can grant them to a key. Keys never inherit "
         "scopes.",
         "If a key leaks, revoke it immediately under Settings > API keys. Revocation takes "
         "effect within one minute across all regions. Then create a replacement key."),
    _doc("sso-guide", "Single sign-on setup guide", "guide", "canonical", "2026-05-12",
         "To set up SAML, create an application in your identity provider, paste the "
         "Fieldnote ACS URL and entity ID, then upload the provider's metadata XML file..",
         "SCIM provisioning creates, updates and deactivates members from your identity "
         "provider. Generate a SCIM token under Settings > Security after SSO is enforced.",
         "Enforcing SSO signs out every member who did not sign in with SAML. Owners keep a "
         "recovery login with email and 2FA in case the identity provider is down.",
         "If members see 'assertion expired', check that the identity provider's clock is in "
         "sync; Fieldnote rejects assertions more than three minutes old on arrival.."),
    _doc("support-runbook", "Support runbook (internal)", "runbook", "internal", "2026-09-30",
         "Escalate billing disputes above 5,000 EUR to the billing lead. Do not promise "
         "refunds outside policy in writing. Link the workspace id in every escalation.",
         "Team leads may approve goodwill refunds on annual plans up to 30 days after the "
         "charge when the customer reports a service outage. Record the approval in the "
         "ticket.",
         "Feature flags such as AuditExport are enabled from the admin console after "
         "checking the plan. Log the ticket number in the flag note so the change can be audited "
         "later.",
         internal=True),
    _doc("data-export", "Exporting workspace data", "guide", "canonical", "2026-04-22",
         "Workspace owners can export all workspace data as a ZIP of JSON files and "
         "attachments from Settings > Data export. The link is emailed when the export is "
         "ready.",
         "A full export can run once every 24 hours per workspace. Exports larger than 50 GB "
         "are split into parts, each downloadable for seven days after the email.."),
    _doc("legacy-pricing", "Pricing and refunds (2023)", "policy", "deprecated", "2023-11-01",
         "Annual plans can be refunded in full within 30 days of purchase, no questions "
         "asked. After 30 days, refunds are prorated for the unused months of the term..",
         "Starter is free for up to 5 seats. Paid plans are billed per active member, "
         "counted on the first day of each month. Business is 8 USD per member per month."),
)


def _build_chunks() -> dict[str, CorpusChunk]:
    out: dict[str, CorpusChunk] = {}
    for doc in DOCUMENTS:
        for pos, text in enumerate(doc.chunks):
            cid = f"{doc.id}#{pos}"
            out[cid] = CorpusChunk(cid, doc.id, pos, text, doc.authority, doc.updated,
                                   doc.internal, doc.mirror_of)
    return out


CHUNKS: dict[str, CorpusChunk] = _build_chunks()
DOCS: dict[str, Document] = {d.id: d for d in DOCUMENTS}


def mirror_original(chunk: CorpusChunk) -> str | None:
    """The id of the chunk a mirror chunk repeats, or None."""
    return f"{chunk.mirror_of}#{chunk.position}" if chunk.mirror_of else None

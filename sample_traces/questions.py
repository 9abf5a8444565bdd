"""Questions users ask the synthetic support assistant, and which chunks decide each one.

Labels are per question: the same chunk is the direct answer to one question and irrelevant
to another. ``label_for`` gives the label a chunk gets in a request for a question.
"""

from __future__ import annotations

from dataclasses import dataclass

from midtrace.sample_traces.corpus import CHUNKS


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    correct_answer: str
    wrong_answer: str
    direct: tuple[str, ...] = ()
    constraint: str | None = None
    constraints: tuple[str, ...] = ()
    partial_answer: str | None = None
    conflicts: tuple[str, ...] = ()
    background: tuple[str, ...] = ()
    wrong_source: str | None = None
    weight: float = 1.0
    # Mean retrieval score of the decisive chunks: lower means retrieval tends to rank them
    # below near-miss distractors, into the middle of the prompt.
    salience: float = 0.80

    @property
    def decisive(self) -> tuple[str, ...]:
        return self.direct + ((self.constraint,) if self.constraint else ())

    @property
    def in_corpus(self) -> bool:
        return bool(self.direct)


REFUND_ANNUAL = "What is the refund window for annual plans?"
AUDIT_EXPORT = "Can enterprise customers export audit logs through the admin API?"
RATE_LIMIT = "What is the rate limit for the admin API?"

QUESTIONS: tuple[Question, ...] = (
    Question("q-refund-annual", REFUND_ANNUAL,
             "Annual plans can be refunded within 14 days of the charge; after that the "
             "request expires.",
             "You can request a refund within 30 days.",
             direct=("refund-policy#2",), conflicts=("hub-warranty#1", "legacy-pricing#0"),
             background=("refund-policy#3", "refund-policy#0"), wrong_source="hub-warranty#1",
             weight=3.0, salience=0.74),
    Question("q-audit-export", AUDIT_EXPORT,
             "Yes, through GET /admin/v2/audit-logs/export, but only for Enterprise Plus "
             "workspaces and only after support enables the AuditExport feature flag.",
             "Yes, any admin token can call GET /v1/audit for enterprise workspaces.",
             direct=("admin-api#3",), constraint="admin-api#4",
             constraints=("Enterprise Plus only", "AuditExport feature flag"),
             partial_answer="Yes, audit log export is available through the admin API for "
                            "enterprise customers.",
             conflicts=("migration-v1#1",), background=("changelog#1", "plans#3"),
             wrong_source="migration-v1#1", weight=2.5, salience=0.76),
    Question("q-rate-limit", RATE_LIMIT,
             "600 requests per minute per workspace, with bursts up to 50 per second.",
             "100 requests per minute per API token.",
             direct=("admin-api#1",), conflicts=("migration-v1#0",),
             background=("changelog#0", "admin-api#7"), wrong_source="migration-v1#0",
             weight=2.5, salience=0.77),
    Question("q-refund-monthly", "Can I get a refund on a monthly plan?",
             "Monthly charges are not refunded; you keep access until the end of the month. "
             "Double charges from a billing error are refunded.",
             "Yes, monthly plans are refundable within 14 days.",
             direct=("refund-policy#1",), conflicts=("refund-policy#2",),
             wrong_source="refund-policy#2", salience=0.79),
    Question("q-refund-how", "How do I request a refund?",
             "A workspace owner uses Settings > Billing > Request refund or emails billing from "
             "the owner's address.", "Contact your reseller.",
             direct=("refund-policy#3",), background=("refund-policy#0",),
             wrong_source="refund-policy#0", salience=0.83),
    Question("q-key-rotation", "How do I rotate an API key without downtime?",
             "Create a second key, deploy it, then revoke the old one; two keys can overlap for "
             "up to 24 hours.",
             "Revoke the old key, then create a new one; expect a short interruption.",
             direct=("api-keys#1",), conflicts=("migration-v1#2",), background=("changelog#2",),
             wrong_source="migration-v1#2", weight=1.5, salience=0.78),
    Question("q-grace-period", "What happens if a payment fails?",
             "We retry for 7 days with full access; then the workspace becomes read-only.",
             "The workspace is suspended immediately.",
             direct=("billing-faq#2",), salience=0.82),
    Question("q-audit-retention", "How long are audit logs kept?",
             "365 days on Enterprise and Enterprise Plus, 90 days on other plans.",
             "Audit logs are kept for 30 days.", direct=("security-policy#2",),
             conflicts=("security-policy#1",), wrong_source="security-policy#1", salience=0.80),
    Question("q-saml-plans", "Which plans include SAML single sign-on?",
             "Business and above; Starter cannot enforce SSO.", "Only Enterprise plans.",
             direct=("security-policy#3",), background=("sso-guide#0",), salience=0.81),
    Question("q-eu-residency", "Can we move our workspace to the EU region?",
             "EU residency is for Enterprise plans; an existing workspace needs a migration "
             "request to support and a maintenance window.",
             "Yes, choose the Frankfurt region in settings.",
             direct=("changelog#4",), constraint="security-policy#5",
             constraints=("Enterprise plans only", "migration request for existing workspaces"),
             partial_answer="Yes, EU data residency is available: choose the Frankfurt region.",
             salience=0.78),
    Question("q-scim", "How do we turn on SCIM provisioning?",
             "Enforce SAML SSO first, then generate a SCIM token under Settings > Security.",
             "Generate a SCIM token under Settings > Security.",
             direct=("sso-guide#1",), constraint="admin-api#5",
             constraints=("SSO must be enforced first",),
             partial_answer="Generate a SCIM token under Settings > Security and point your "
                            "identity provider at /scim/v2.",
             background=("sso-guide#0",), salience=0.79),
    Question("q-webhook-verify", "How do I verify that a webhook came from Fieldnote?",
             "Check the Fieldnote-Signature header: HMAC-SHA256 of the raw body with your "
             "endpoint secret; reject deliveries older than five minutes.",
             "Webhooks are unsigned; allow-list the Fieldnote egress IP ranges.",
             direct=("admin-api#6",), conflicts=("migration-v1#3",), background=("changelog#3",),
             wrong_source="migration-v1#3", salience=0.80),
    Question("q-429", "What should my integration do on a 429 error?",
             "Wait at least the Retry-After seconds, then retry with jitter.",
             "Retry immediately up to three times.", direct=("admin-api#7",),
             background=("admin-api#1",), salience=0.84),
    Question("q-trial", "How long is the free trial?",
             "14 days of the Business plan, extendable once by up to 14 days.",
             "30 days.", direct=("plans#4",), weight=1.5, salience=0.85),
    Question("q-seats-business", "How many seats does the Business plan allow?",
             "Up to 300 seats.", "Up to 10 seats.", direct=("plans#1",),
             conflicts=("legacy-pricing#1",), salience=0.83),
    Question("q-storage", "How much storage does Starter include?", "10 GB per workspace.",
             "1 TB.", direct=("plans#2",), salience=0.84),
    Question("q-guests", "Do guest seats cost extra?",
             "No, guests are free on Business and above, up to five per paid seat.",
             "Yes, guests are billed as members.", direct=("plans#5",),
             conflicts=("legacy-pricing#1",), wrong_source="legacy-pricing#1", salience=0.82),
    Question("q-deleted-workspace", "Can I restore a deleted workspace?",
             "Yes, within 30 days of deletion; after that it is erased.",
             "No, deletion is immediate.", direct=("security-policy#1",), salience=0.82),
    Question("q-2fa", "Can admins require two-factor authentication?",
             "Yes, under Settings > Security; members set it up at next sign-in.",
             "Only owners can use 2FA.", direct=("security-policy#4",), salience=0.85),
    Question("q-data-export", "How do I export all our workspace data?",
             "An owner starts it under Settings > Data export; it is a ZIP of JSON files, and a "
             "full export can run once every 24 hours.",
             "Use the audit log export endpoint.", direct=("data-export#0",),
             constraint="data-export#1", constraints=("once every 24 hours",),
             partial_answer="An owner starts it under Settings > Data export.",
             conflicts=("admin-api#3",), wrong_source="admin-api#3", salience=0.80),
    Question("q-hub-warranty", "How long do I have to file a warranty claim for the Hub?",
             "Within 30 days of noticing the defect, during the two-year warranty.",
             "Within 14 days.", direct=("hub-warranty#1",), background=("hub-warranty#0",),
             conflicts=("refund-policy#2",), wrong_source="refund-policy#2", salience=0.82),
    Question("q-hub-replacement", "How fast is a Hub replacement shipped?",
             "An advance replacement ships within two business days.",
             "After we receive the faulty unit.", direct=("hub-warranty#3",), salience=0.84),
    Question("q-billing-cycle", "Can I switch from monthly to annual billing?",
             "Yes, at any time; it applies immediately and the remaining month is credited.",
             "Only at renewal.", direct=("billing-faq#3",), salience=0.82),
    Question("q-vat", "How do I add our VAT number to invoices?",
             "Add it under Settings > Billing > Tax details; it shows on new invoices only.",
             "Email billing to reissue all invoices.", direct=("billing-faq#4",),
             background=("billing-faq#1",), salience=0.84),
    Question("q-downgrade", "Do I get money back if I downgrade my annual plan?",
             "No payout: the unused difference becomes account credit for future invoices.",
             "Yes, the difference is refunded.", direct=("refund-policy#4",),
             conflicts=("legacy-pricing#0",), wrong_source="legacy-pricing#0", salience=0.79),
    Question("q-pagination", "How do I page through users in the admin API?",
             "Pass next_cursor as the cursor parameter; pages default to 100, at most 500.",
             "Use page and per_page parameters.", direct=("admin-api#2",), salience=0.85),
    Question("q-payment-methods", "Which payment methods do you accept?",
             "Visa, Mastercard, American Express and SEPA direct debit; bank transfer for annual "
             "plans over 50 seats.", "Credit cards only.", direct=("billing-faq#0",),
             salience=0.85),
    Question("q-encryption", "Is our data encrypted at rest?",
             "Yes, AES-256 at rest and TLS 1.2+ in transit, keys rotated every 90 days.",
             "Only on Enterprise plans.", direct=("security-policy#0",), salience=0.86),
    # Nothing in the knowledge base answers these: graded wrong, they are "unlabeled".
    Question("q-student", "Do you offer a student discount?",
             "There is no student discount; annual billing is 20% cheaper.",
             "Yes, students get 50% off with a university email.",
             background=("plans#0",), weight=0.8),
    Question("q-on-prem", "Is there an on-premises version of Fieldnote?",
             "No, Fieldnote is cloud-only; EU residency is the closest option.",
             "Yes, Enterprise Plus includes a self-hosted edition.",
             background=("security-policy#5", "plans#3"), weight=0.6),
    Question("q-soc2", "When was your last SOC 2 audit?",
             "I can't find that in the documentation; please ask your account manager.",
             "Our SOC 2 Type II report is from March 2026.",
             background=("security-policy#0",), weight=0.6),
)

BY_ID: dict[str, Question] = {q.id: q for q in QUESTIONS}


def label_for(question: Question, chunk_id: str) -> str:
    """The label a chunk gets in a request for ``question`` (what the app's labeller says)."""
    if chunk_id in question.direct:
        return "direct_answer"
    if chunk_id == question.constraint:
        return "exception_constraint"
    if chunk_id in question.conflicts:
        return "conflicting"
    if chunk_id in question.background:
        return "supporting_background"
    related = {CHUNKS[c].source_id for c in question.direct + question.background}
    return "supporting_background" if CHUNKS[chunk_id].source_id in related else "irrelevant"


def _check() -> None:
    for q in QUESTIONS:
        for cid in q.decisive + q.conflicts + q.background:
            if cid not in CHUNKS:
                raise ValueError(f"question {q.id} names unknown chunk {cid}")
        if q.constraints and not q.constraint:
            raise ValueError(f"question {q.id} has constraints but no constraint chunk")


_check()

-- The reference lab's course database: one bootcamp, three cohorts, 2025.
-- Source of truth for lab/data/course.db; rebuild with `python -m lab.tools`.
-- Dates are ISO 8601 text, money is integer euro cents, nothing is random.

CREATE TABLE cohorts (
    id           TEXT PRIMARY KEY,
    name         TEXT NOT NULL,
    starts_on    TEXT NOT NULL,
    ends_on      TEXT NOT NULL,
    price_cents  INTEGER NOT NULL CHECK (price_cents > 0)
);

CREATE TABLE students (
    handle  TEXT PRIMARY KEY,
    name    TEXT NOT NULL,
    email   TEXT NOT NULL UNIQUE,
    cohort  TEXT NOT NULL REFERENCES cohorts (id)
);

CREATE TABLE purchases (
    id            INTEGER PRIMARY KEY,
    student       TEXT NOT NULL REFERENCES students (handle),
    cohort        TEXT NOT NULL REFERENCES cohorts (id),
    purchased_on  TEXT NOT NULL,
    amount_cents  INTEGER NOT NULL CHECK (amount_cents > 0)
);

-- One row per refund request; amount_cents follows docs/refund-policy.md:
-- full up to day 14 after purchase, 50% up to day 30, nothing after.
CREATE TABLE refunds (
    id            INTEGER PRIMARY KEY,
    purchase_id   INTEGER NOT NULL UNIQUE REFERENCES purchases (id),
    requested_on  TEXT NOT NULL,
    decided_on    TEXT NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('approved', 'rejected')),
    amount_cents  INTEGER NOT NULL CHECK (amount_cents >= 0),
    reason        TEXT NOT NULL
);

-- Scores are final, after the late penalty of docs/late-submissions.md;
-- NULL means more than three days late, so never graded.
CREATE TABLE submissions (
    id            INTEGER PRIMARY KEY,
    student       TEXT NOT NULL REFERENCES students (handle),
    lab           TEXT NOT NULL,
    submitted_at  TEXT NOT NULL,
    days_late     INTEGER NOT NULL CHECK (days_late >= 0),
    score         INTEGER CHECK (score BETWEEN 0 AND 100)
);

-- The nightly grading job, all cohorts and labs together.
CREATE TABLE grading_runs (
    id           INTEGER PRIMARY KEY,
    started_at   TEXT NOT NULL,
    finished_at  TEXT NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
    graded       INTEGER NOT NULL,
    ungraded     INTEGER NOT NULL,
    note         TEXT
);

INSERT INTO cohorts VALUES
    ('2025-spring', 'Agent Engineering, Spring 2025', '2025-03-03', '2025-05-23', 120000),
    ('2025-autumn', 'Agent Engineering, Autumn 2025', '2025-09-08', '2025-11-28', 135000),
    ('2026-spring', 'Agent Engineering, Spring 2026', '2026-03-02', '2026-05-22', 135000);

INSERT INTO students VALUES
    ('ada',   'Ada Okafor',       'ada.okafor@example.com',     '2025-spring'),
    ('bruno', 'Bruno Lindqvist',  'bruno.lindqvist@example.com', '2025-spring'),
    ('chen',  'Chen Wei',         'chen.wei@example.com',       '2025-spring'),
    ('dara',  'Dara Nguyen',      'dara.nguyen@example.com',    '2025-autumn'),
    ('emil',  'Emil Novák',       'emil.novak@example.com',     '2025-autumn'),
    ('farah', 'Farah Haddad',     'farah.haddad@example.com',   '2025-autumn'),
    ('gus',   'Gustavo Ribeiro',  'gustavo.ribeiro@example.com', '2025-autumn'),
    ('hana',  'Hana Sato',        'hana.sato@example.com',      '2025-autumn'),
    ('ines',  'Inès Moreau',      'ines.moreau@example.com',    '2025-autumn'),
    ('jonas', 'Jonas Becker',     'jonas.becker@example.com',   '2026-spring'),
    ('kemi',  'Kemi Adeyemi',     'kemi.adeyemi@example.com',   '2026-spring'),
    ('lea',   'Léa Fontaine',     'lea.fontaine@example.com',   '2026-spring');

-- Chen bought with the early-bird discount (20% off).
INSERT INTO purchases VALUES
    (1,  'ada',   '2025-spring', '2025-01-20', 120000),
    (2,  'bruno', '2025-spring', '2025-02-03', 120000),
    (3,  'chen',  '2025-spring', '2025-01-06',  96000),
    (4,  'dara',  '2025-autumn', '2025-07-01', 135000),
    (5,  'emil',  '2025-autumn', '2025-07-15', 135000),
    (6,  'farah', '2025-autumn', '2025-08-04', 135000),
    (7,  'gus',   '2025-autumn', '2025-08-11', 135000),
    (8,  'hana',  '2025-autumn', '2025-08-20', 135000),
    (9,  'ines',  '2025-autumn', '2025-08-25', 135000),
    (10, 'jonas', '2026-spring', '2025-11-03', 135000),
    (11, 'kemi',  '2026-spring', '2025-11-10', 135000),
    (12, 'lea',   '2026-spring', '2025-11-17', 135000);

-- Days after purchase: 10, 20, 45, 14 (last day of a full refund), 30 (last day of 50%).
INSERT INTO refunds VALUES
    (1, 2,  '2025-02-13', '2025-02-14', 'approved', 120000, 'New job starts before the cohort ends'),
    (2, 6,  '2025-08-24', '2025-08-26', 'approved',  67500, 'Schedule conflict with a family move'),
    (3, 9,  '2025-10-09', '2025-10-10', 'rejected',      0, 'Course is harder than expected'),
    (4, 11, '2025-11-24', '2025-11-25', 'approved', 135000, 'Employer will pay for a later cohort'),
    (5, 12, '2025-12-17', '2025-12-18', 'approved',  67500, 'Cannot take the time off work');

-- Labs and deadlines (23:59 UTC): provider-swap 2025-03-28 / 2025-09-26,
-- tool-fixtures 2025-04-18 / 2025-10-17, eval-harness 2025-05-09 / 2025-11-07.
INSERT INTO submissions VALUES
    (1,  'ada',   'provider-swap', '2025-03-27 18:42:00', 0, 88),
    (2,  'chen',  'provider-swap', '2025-03-28 23:10:00', 0, 54),
    (3,  'ada',   'tool-fixtures', '2025-04-18 09:05:00', 0, 91),
    (4,  'chen',  'tool-fixtures', '2025-04-19 20:30:00', 1, 62),
    (5,  'ada',   'eval-harness',  '2025-05-08 16:00:00', 0, 79),
    (6,  'chen',  'eval-harness',  '2025-05-09 22:45:00', 0, 47),
    (7,  'dara',  'provider-swap', '2025-09-25 21:14:00', 0, 95),
    (8,  'emil',  'provider-swap', '2025-09-26 23:58:00', 0, 71),
    (9,  'gus',   'provider-swap', '2025-09-28 10:20:00', 2, 58),
    (10, 'hana',  'provider-swap', '2025-09-24 12:00:00', 0, 83),
    (11, 'ines',  'provider-swap', '2025-09-26 19:37:00', 0, 66),
    (12, 'dara',  'tool-fixtures', '2025-10-17 14:02:00', 0, 90),
    (13, 'emil',  'tool-fixtures', '2025-10-17 23:41:00', 0, 64),
    (14, 'gus',   'tool-fixtures', '2025-10-22 08:15:00', 5, NULL),
    (15, 'hana',  'tool-fixtures', '2025-10-16 17:48:00', 0, 77),
    (16, 'ines',  'tool-fixtures', '2025-10-18 11:03:00', 1, 52),
    (17, 'dara',  'eval-harness',  '2025-11-06 20:30:00', 0, 93),
    (18, 'emil',  'eval-harness',  '2025-11-07 22:12:00', 0, 68),
    (19, 'gus',   'eval-harness',  '2025-11-07 23:59:00', 0, 61),
    (20, 'hana',  'eval-harness',  '2025-11-09 07:25:00', 2, 70),
    (21, 'ines',  'eval-harness',  '2025-11-07 15:50:00', 0, 74);

INSERT INTO grading_runs VALUES
    (1, '2025-09-27 02:00:00', '2025-09-27 02:14:05', 'ok',     41,  0, NULL),
    (2, '2025-10-18 02:00:00', '2025-10-18 02:10:00', 'failed', 12, 37,
        'Provider answered HTTP 429 for 40 minutes; retries were unbounded; the job stopped at 02:10.'),
    (3, '2025-10-18 09:30:00', '2025-10-18 09:41:12', 'ok',     37,  0,
        'Manual re-run after the 429 incident: the 37 ungraded submissions graded.'),
    (4, '2025-11-08 02:00:00', '2025-11-08 02:16:40', 'ok',     48,  0, NULL),
    (5, '2025-11-10 02:00:00', '2025-11-10 02:01:02', 'ok',      3,  0, 'Late submissions only.');

-- The refund policy of docs/refund-policy.md as rows, for the refund agent (lab/refunds/):
-- a request on day `up_to_day` or earlier after the purchase gets `share_percent` of the
-- amount paid; after the last window, nothing. A view: it adds no table and changes no row.
CREATE VIEW refund_windows (up_to_day, share_percent) AS
    VALUES (14, 100), (30, 50);

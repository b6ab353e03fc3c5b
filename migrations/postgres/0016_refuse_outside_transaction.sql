-- A change whose only statement is its last one (an insert with its events) is sent without
-- BEGIN and COMMIT: one statement commits atomically on its own. When the company has webhooks
-- the change needs more statements (the deliveries, built by the server from the events the
-- statement returns) in the same transaction, so the statement calls this and undoes itself;
-- the server then runs the change in a transaction. Its SQLSTATE is what the server looks for,
-- its message (`reason`) tells why.
CREATE FUNCTION refuse_outside_transaction(reason TEXT) RETURNS TEXT
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'AS001', MESSAGE = reason;
END
$$;

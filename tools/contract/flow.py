"""An integrator's first session, through the Python client generated from the OpenAPI document.

    python flow.py CLIENT_DIR BASE_URL API_KEY

CLIENT_DIR holds the package `openapi-python-client generate` wrote (default configuration).
Creates a shop, a customer and an appointment for it, lists appointments with filters, updates
the appointment, and reads the `errors` of a 422 problem. Every call must answer the status the
document gives for it, with a body the generated models parse (they raise on a missing required
field); anything else, an undocumented status included, fails with a non-zero exit.
"""

import datetime
import sys

sys.path.insert(0, sys.argv[1])

from autoshop_client import AuthenticatedClient  # noqa: E402
from autoshop_client.api.appointments import create_appointment, list_appointments, update_appointment  # noqa: E402
from autoshop_client.api.customers import create_customer  # noqa: E402
from autoshop_client.api.settings import list_timezones  # noqa: E402
from autoshop_client.api.shops import create_shop  # noqa: E402
from autoshop_client.models import (  # noqa: E402
    Appointment,
    AppointmentInput,
    Customer,
    DataListString,
    NewCustomer,
    PageAppointment,
    Problem,
    ShopInfo,
    ShopInput,
)


def expect(step, response, status, model):
    """The response of `step` has `status` and its body parsed as `model`."""
    parsed = response.parsed
    if response.status_code != status or not isinstance(parsed, model):
        sys.exit(f"flow: {step}: expected {status} {model.__name__}, got {response.status_code}: {response.content[:500]!r}")
    print(f"flow: {step}: {status} {model.__name__}")
    return parsed


def main():
    base_url, key = sys.argv[2], sys.argv[3]
    client = AuthenticatedClient(base_url=base_url, token=key, raise_on_unexpected_status=True)
    with client:
        zones = expect("list time zones", list_timezones.sync_detailed(client=client), 200, DataListString)
        assert "America/Chicago" in zones.data, "the zone list names America/Chicago"

        shop = expect(
            "create a shop",
            create_shop.sync_detailed(client=client, body=ShopInput(name="Flow Motors", timezone="America/Chicago")),
            201,
            ShopInfo,
        )

        customer = expect(
            "create a customer",
            create_customer.sync_detailed(
                client=client,
                body=NewCustomer(
                    shop_id=shop.shop_id,
                    business_name="",
                    first_name="Ada",
                    last_name="Lovelace",
                    address="1 Analytical Way",
                    city="Springfield",
                    state="IL",
                    zip_="62701",
                    email="ada@example.com",
                    credit_limit=2500.5,
                ),
                idempotency_key="flow-customer-1",
            ),
            201,
            Customer,
        )
        assert customer.first_name == "Ada" and customer.credit_limit == 2500.5

        def appointment_body(**changes):
            fields = dict(
                shop_id=shop.shop_id,
                date="2030-03-04 09:30",
                year="2019",
                make="Toyota",
                model="Camry",
                home_phone="",
                work_phone="",
                cell_phone="(555) 010-2030",
                customer_id=customer.customer_id,
            )
            fields.update(changes)
            return AppointmentInput(**fields)

        appointment = expect(
            "create an appointment",
            create_appointment.sync_detailed(client=client, body=appointment_body(reason="Oil change")),
            201,
            Appointment,
        )
        # Names come from the customer; the local time is read in the shop's zone.
        assert (appointment.first_name, appointment.last_name) == ("Ada", "Lovelace"), appointment
        assert appointment.schedule.start == "2030-03-04T15:30:00.000000Z", appointment.schedule

        page = expect(
            "list appointments with filters",
            list_appointments.sync_detailed(
                client=client,
                filtershop_id=shop.shop_id,
                filterdate=datetime.date(2030, 3, 4),
                filtermake="toy",
                with_details=True,
            ),
            200,
            PageAppointment,
        )
        assert [a.appointment_id for a in page.data] == [appointment.appointment_id], page.data
        assert page.data[0].customer.customer_id == customer.customer_id
        assert page.meta.total == 1

        updated = expect(
            "update the appointment",
            update_appointment.sync_detailed(
                appointment.appointment_id, client=client, body=appointment_body(reason="Brakes", hours=1.5)
            ),
            200,
            Appointment,
        )
        assert (updated.reason, updated.hours, updated.schedule.end) == ("Brakes", 1.5, "2030-03-04T17:00:00.000000Z")

        problem = expect(
            "update with an invalid year",
            update_appointment.sync_detailed(appointment.appointment_id, client=client, body=appointment_body(year="19")),
            422,
            Problem,
        )
        errors = problem.errors.additional_properties
        assert list(errors) == ["year"] and errors["year"], errors
        print(f"flow: the 422 says {errors}")


main()

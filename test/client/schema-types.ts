/**
 * The client's types are written out, so that its package needs nothing of the service's; each line
 * here stops the type check when one of them no longer says what its route's schema does.
 */
import type { Static } from 'typebox';
import type {
  BuildVersion,
  Currency,
  CurrencyQuery,
  EchoResult,
  EventsQuery,
  ExchangeResult,
  Greeting,
  GreetingEvent,
  Health,
  HelloMessage,
  Profile,
  ProfileChanges,
  Readiness,
  SearchQuery,
  SearchResult,
} from '../../packages/client/src/index.js';
import type { CurrencyItem, CurrencyListQuery } from '../../src/routes/currencies.js';
import type { Echo } from '../../src/routes/echo.js';
import type {
  EventsQuery as EventsQuerySchema,
  GreetingEvent as ServiceGreetingEvent,
} from '../../src/routes/events.js';
import type { Exchange } from '../../src/routes/exchange.js';
import type { Health as HealthSchema, Readiness as ReadinessSchema } from '../../src/routes/health.js';
import type { Greeting as GreetingSchema, HelloMessage as HelloMessageSchema } from '../../src/routes/hello.js';
import type { FieldsBody, ProfileSchema } from '../../src/routes/profile.js';
import type { SearchQuery as SearchQuerySchema, SearchResult as SearchResultSchema } from '../../src/routes/search.js';
import type { Version } from '../../src/routes/version.js';

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Holds<T extends true> = T;
/** The decimals the client gives as their exact text, where the schema says number. */
type Decimals = 'amount' | 'rate' | 'result';

export type ClientTypesFollowTheSchemas = [
  Holds<Same<HelloMessage, Static<typeof HelloMessageSchema>>>,
  Holds<Same<Greeting, Static<typeof GreetingSchema>>>,
  Holds<Same<SearchQuery, Static<typeof SearchQuerySchema>>>,
  Holds<Same<SearchResult, Static<typeof SearchResultSchema>>>,
  Holds<Same<Profile, Static<typeof ProfileSchema>>>,
  Holds<Same<ProfileChanges, Static<typeof FieldsBody>>>,
  Holds<Same<Health, Static<typeof HealthSchema>>>,
  Holds<Same<BuildVersion, Static<typeof Version>>>,
  Holds<Same<Readiness, Static<typeof ReadinessSchema>>>,
  Holds<Same<EventsQuery, Static<typeof EventsQuerySchema>>>,
  Holds<Same<GreetingEvent, ServiceGreetingEvent>>,
  Holds<Same<Omit<ExchangeResult, Decimals>, Omit<Static<typeof Exchange>, Decimals>>>,
  Holds<Same<keyof ExchangeResult, keyof Static<typeof Exchange>>>,
  Holds<Same<Omit<Currency, 'rate'>, Required<Omit<Static<typeof CurrencyItem>, 'rate'>>>>,
  Holds<Same<keyof Currency, keyof Static<typeof CurrencyItem>>>,
  Holds<Same<Pick<EchoResult, 'echo' | 'timestamp'>, Omit<Static<typeof Echo>, 'received'>>>,
  Holds<Same<keyof EchoResult, keyof Static<typeof Echo>>>,
  Holds<Same<keyof CurrencyQuery, keyof Static<typeof CurrencyListQuery>>>,
];
